/* llm-envs report: episode lists, filters and conversations, from the data block of the page.
 *
 * Every piece of run text (actions, prompts, parsed answers, sandbox output) goes into the page
 * through textContent, never as markup. Run text inside the page's own lines (agent names, error
 * messages, run labels) is a <bdi> element (iso), so that its bidi controls or right-to-left
 * letters cannot reorder the words around it. Episodes are unpacked (gzip, base64) only when opened
 * or searched. No request leaves the page.
 */
(function () {
  "use strict";

  const DATA = JSON.parse(document.getElementById("report-data").textContent);
  const DATASETS = DATA.datasets || {};
  const PAGE_ROWS = 200; // rows drawn at first; "show more" adds as many again

  // ------------------------------------------------------------------ small helpers
  function h(tag, props, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(props || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "class") node.className = value;
      else if (key === "text") node.textContent = value;
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else node.setAttribute(key, value === true ? "" : String(value));
    }
    for (const child of children.flat(Infinity)) { // (lines are built as nested arrays of parts)
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : String(child));
    }
    return node;
  }

  /* Run text inside a line of the page: isolated, so that a bidi override (U+202E) or
   * right-to-left letters in it cannot reorder the page's own words before and after it. */
  function iso(text) {
    return h("bdi", { text: String(text) });
  }

  /* `parts` (strings and nodes) with `sep` between them. */
  function joined(parts, sep) {
    return parts.flatMap((part, i) => (i ? [sep, part] : [part]));
  }

  const ISOLATE_DIRS = { "\u2066": "ltr", "\u2067": "rtl", "\u2068": null };

  /* Text composed by the report's Python side, its run text wrapped in isolate characters (FSI,
   * LRI or RLI ... PDI: llm_envs.report.page.isolated), as nodes: each isolate a <bdi> element
   * (as the Python side's esc writes them). */
  function rich(text) {
    const root = h("span");
    let node = root, plain = "";
    const flush = () => { if (plain) node.append(plain); plain = ""; };
    for (const char of String(text)) {
      if (char in ISOLATE_DIRS) {
        flush();
        const inner = h("bdi", { dir: ISOLATE_DIRS[char] });
        node.append(inner);
        node = inner;
      } else if (char === "\u2069") {
        flush();
        if (node !== root) node = node.parentNode; // a PDI that closes nothing does nothing
      } else {
        plain += char;
      }
    }
    flush();
    return Array.from(root.childNodes);
  }

  function num(value, digits = 3) {
    if (value === null || value === undefined || !Number.isFinite(Number(value))) return "-";
    return Number(value).toFixed(digits);
  }

  function signed(value, digits = 3) {
    if (value === null || value === undefined || !Number.isFinite(Number(value))) return "-";
    return (Number(value) >= 0 ? "+" : "") + Number(value).toFixed(digits);
  }

  function asText(value) {
    if (value === null || value === undefined) return "null";
    if (typeof value === "string") return value;
    const line = JSON.stringify(value);
    return line.length <= 100 ? line : JSON.stringify(value, null, 1);
  }

  function showError(where, error) {
    console.error("report:", error);
    where.append(h("p", { class: "warning", text: "Could not show this: " + (error && error.message || error) }));
  }

  // ------------------------------------------------------------------ unpacking episodes
  const unpacked = new Map();

  /* The chunk of consecutive episodes row `pos` lives in (gzip, base64), unpacked once. */
  function unpackChunk(key, chunk) {
    const id = key + "/" + chunk;
    if (!unpacked.has(id)) {
      unpacked.set(id, (async function () {
        if (typeof DecompressionStream === "undefined") {
          throw new Error("this browser cannot unpack the episodes (no DecompressionStream); " +
            "use a current Chromium, Firefox or Safari, or `llm-envs show RUN`");
        }
        const binary = atob(DATASETS[key].packed[chunk]);
        const bytes = new Uint8Array(binary.length);
        for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
        const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
        return JSON.parse(await new Response(stream).text());
      })());
    }
    return unpacked.get(id);
  }

  async function unpack(key, pos) {
    const row = DATASETS[key].rows[pos];
    return (await unpackChunk(key, row.c))[row.k];
  }

  const haystacks = new Map();

  function searchText(detail) {
    const parts = [detail.id || "", detail.env || ""];
    for (const record of detail.records || []) {
      const observation = record.observation || {};
      parts.push(record.agent, record.role, record.action, observation.prompt || "",
        JSON.stringify(record.parsed || {}), JSON.stringify(record.info || {}));
    }
    for (const step of detail.steps || []) if (step.error) parts.push(String(step.error));
    return parts.join("\n").toLowerCase();
  }

  /* The searchable text of every episode of a dataset (unpacked once, then kept). */
  function haystack(key) {
    if (!haystacks.has(key)) {
      const rows = DATASETS[key].rows;
      haystacks.set(key, Promise.all(rows.map((_, pos) => unpack(key, pos).then(searchText))));
    }
    return haystacks.get(key);
  }

  // ------------------------------------------------------------------ one episode as a conversation
  function factsLine(detail) {
    const players = Object.entries(detail.agents || {}).map(([a, p]) => [iso(a), " = ", iso(p)]);
    const rewards = Object.entries(detail.rewards || {}).map(([a, r]) => [iso(a), " " + signed(r)]);
    const metrics = Object.entries(detail.metrics || {}).map(([k, v]) =>
      [iso(k), " ", typeof v === "number" ? num(v, 3).replace(/\.?0+$/, "") || "0" : iso(asText(v))]);
    const line = (items) => (items.length ? joined(items, ", ") : "-");
    return h("dl", { class: "episode-facts" },
      h("dt", { text: "played by" }), h("dd", {}, line(players)),
      h("dt", { text: "rewards" }), h("dd", {}, line(rewards)),
      h("dt", { text: "metrics" }), h("dd", {}, line(metrics)),
      h("dt", { text: "time" }), h("dd", { text: num(detail.duration_s, 2) + " s" }));
  }

  function keyValues(object, cls) {
    const list = h("dl", { class: cls });
    for (const [key, value] of Object.entries(object)) {
      const text = asText(value);
      list.append(h("dt", { text: key }),
        text.includes("\n") || text.length > 120 ? h("dd", {}, h("pre", { text: text })) : h("dd", { text: text }));
    }
    return list;
  }

  function creditTable(record, records) {
    const rows = [];
    if (Array.isArray(record.credits) && record.credits.length) {
      for (const credit of record.credits) {
        let when = "with this action";
        if (credit.at !== record.index) {
          const source = records[credit.at];
          when = ["later: with action #" + credit.at, source ? [" (turn " + source.turn + ", ", iso(source.agent), ")"] : ""];
        }
        rows.push([credit.component, signed(credit.amount), when, credit.at !== record.index]);
      }
    } else {
      for (const [component, amount] of Object.entries(record.reward_components || {})) {
        rows.push([component, signed(amount), "(when it arrived was not recorded in this run)", false]);
      }
    }
    if (!rows.length) return null;
    return h("table", { class: "credit" },
      h("thead", {}, h("tr", {}, h("th", { text: "reward component" }), h("th", { text: "amount" }), h("th", { text: "arrived" }))),
      h("tbody", {}, rows.map(([component, amount, when, delayed]) =>
        h("tr", { class: delayed ? "delayed" : null }, h("td", { text: component }), h("td", { class: "num", text: amount }), h("td", {}, when)))));
  }

  const SANDBOX_KEYS = ["output", "stdout", "stderr", "error"];

  function actionCard(record, step, detail, focusAgent) {
    const player = (detail.agents || {})[record.agent];
    const failedCall = step && step.error;
    const card = h("li", {
      class: "action" + (record.format_ok === false ? " format-error" : "") + (failedCall ? " call-error" : "") +
        // the chosen agent is an agent id (evaluations) or the name of who played it (arena games)
        (focusAgent && record.agent !== focusAgent && player !== focusAgent ? " dimmed" : ""),
      "data-agent": record.agent,
      "data-index": record.index,
    });
    const head = h("div", { class: "action-head" },
      h("span", { class: "badge turn", text: "#" + record.index + " · turn " + record.turn }),
      h("b", { class: "agent", text: record.agent }),
      record.role && record.role !== record.agent ? h("span", { class: "role" }, "(", iso(record.role), ")") : null,
      player ? h("span", { class: "player" }, "played by ", iso(player)) : null,
      h("span", { class: "reward", text: "reward " + signed(record.reward) }),
      record.format_ok === false ? h("span", { class: "badge bad", text: "format error" }) : null,
      failedCall ? h("span", { class: "badge bad", text: "model call failed" }) : null,
      step ? h("span", { class: "tokens", text: (step.prompt_tokens || 0) + " → " + (step.completion_tokens || 0) + " tokens" }) : null);
    card.append(head);

    const promptBox = h("div", { class: "prompt", hidden: true });
    const toggle = h("button", {
      class: "link", type: "button", text: "show prompt",
      onclick: () => {
        if (!promptBox.childElementCount) {
          const observation = record.observation || {};
          promptBox.append(h("div", { class: "label", text: "instruction (system)" }), h("pre", { text: observation.instruction || "" }),
            h("div", { class: "label", text: "prompt (user)" }), h("pre", { text: observation.prompt || "" }));
        }
        promptBox.hidden = !promptBox.hidden;
        toggle.textContent = promptBox.hidden ? "show prompt" : "hide prompt";
      },
    });
    card.append(toggle, promptBox);

    const action = String(record.action === undefined ? "" : record.action);
    card.append(h("div", { class: "label", text: "action" }),
      action.trim() ? h("pre", { class: "action-text", text: action }) : h("p", { class: "empty", text: "<empty action>" }));
    if (failedCall) card.append(h("p", { class: "warning" }, "model call failed: ", iso(step.error)));
    if (record.parsed && Object.keys(record.parsed).length) {
      card.append(h("div", { class: "label", text: "parsed" }), keyValues(record.parsed, "parsed"));
    }
    const info = record.info || {};
    const sandbox = SANDBOX_KEYS.filter((k) => typeof info[k] === "string" && info[k].trim());
    for (const key of sandbox) {
      card.append(h("div", { class: "label", text: "sandbox " + key }), h("pre", { class: "sandbox", text: info[key] }));
    }
    const rest = {};
    for (const [key, value] of Object.entries(info)) if (!sandbox.includes(key)) rest[key] = value;
    if (Object.keys(rest).length) card.append(h("div", { class: "label", text: "info" }), keyValues(rest, "info"));
    const credit = creditTable(record, detail.records || []);
    if (credit) card.append(credit);
    return card;
  }

  function renderEpisode(detail, focusAgent, onClose, title) {
    const steps = new Map();
    for (const step of detail.steps || []) if (step.record_index !== undefined && step.record_index !== null) steps.set(step.record_index, step);
    const box = h("article", { class: "episode", "data-episode": detail.index });
    const heading = h("div", { class: "episode-head" },
      h("h3", {}, title || [(detail.winner !== undefined ? "Game #" : "Episode #") + detail.index + " · seed " + detail.seed,
        detail.id ? [" · ", iso(detail.id)] : null]));
    if (onClose) heading.append(h("button", { class: "close", type: "button", text: "close", onclick: onClose }));
    box.append(heading);
    if (detail.winner !== undefined) {
      box.append(h("p", { class: "note" }, "seats: ", joined(Object.entries(detail.seats || {}).map(([a, s]) => [iso(a), " as ", iso(s)]), ", "),
        " · winner: ", detail.winner === null ? "draw" : iso(detail.winner)));
    }
    box.append(factsLine(detail));
    const records = detail.records || [];
    if (!records.length) box.append(h("p", { class: "note", text: "No actions were saved for this episode." }));
    box.append(h("ol", { class: "actions" }, records.map((r) => actionCard(r, steps.get(r.index), detail, focusAgent))));
    return box;
  }

  // ------------------------------------------------------------------ an episode list with filters
  class EpisodeList {
    constructor(root, key) {
      this.root = root;
      this.key = key;
      this.data = DATASETS[key];
      this.limit = PAGE_ROWS;
      this.token = 0;
      this.build();
      this.update();
      root.episodeList = this;
    }

    build() {
      const d = this.data;
      const option = (value, text) => h("option", { value: value, text: text });
      this.outcome = h("select", { class: "f-outcome", onchange: () => this.update() },
        option("", "all outcomes"), d.filters.map(([tag, label]) => option(tag, label)));
      this.agent = h("select", { class: "f-agent", onchange: () => this.update() },
        option("", "all agents"), d.agents.map((a) => option(a, a)));
      this.min = h("input", { class: "f-min", type: "number", step: "any", placeholder: "min", oninput: () => this.update() });
      this.max = h("input", { class: "f-max", type: "number", step: "any", placeholder: "max", oninput: () => this.update() });
      this.text = h("input", { class: "f-text", type: "search", placeholder: "search actions, prompts, output…", oninput: () => this.update() });
      this.sort = h("select", { class: "f-sort", onchange: () => this.update() },
        option("index", "in order"), option("reward-desc", "reward: high first"), option("reward-asc", "reward: low first"),
        option("turns-desc", "longest first"), option("turns-asc", "shortest first"));
      this.count = h("span", { class: "count" });
      this.rewardLabel = h("span", { class: "range-label", text: d.rewardLabel + " (any agent)" });
      this.root.append(h("div", { class: "filters" },
        h("label", {}, "outcome ", this.outcome), h("label", {}, "agent ", this.agent),
        h("label", {}, this.rewardLabel, " ", this.min, "–", this.max),
        h("label", { class: "grow" }, this.text), h("label", {}, "sort ", this.sort), this.count));
      this.hasOutcome = d.rows.some((row) => row.s !== null && row.s !== undefined);
      const head = ["#", "seed"];
      if (this.hasOutcome) head.push("outcome");
      head.push("turns", ...d.agents.map((a) => [d.rewardLabel + " ", iso(a)]), ...d.columns, "format errors", "call errors", "tokens");
      this.tbody = h("tbody");
      this.table = h("table", { class: "episode-list" }, h("thead", {}, h("tr", {}, head.map((t) => h("th", {}, t)))), this.tbody);
      this.more = h("button", { class: "more", type: "button", hidden: true, onclick: () => { this.limit += PAGE_ROWS; this.draw(); } });
      this.view = h("div", { class: "episode-view" });
      this.root.append(h("div", { class: "table-wrap" }, this.table), this.more, this.view);
    }

    matches(row, hay, pos) {
      const outcome = this.outcome.value, agent = this.agent.value;
      if (outcome) {
        if (!row.tags.includes(outcome)) return false;
        if (agent && outcome === "format-error" && !(row.fe[agent] > 0)) return false;
        if (agent && outcome === "call-error" && !(row.ce[agent] > 0)) return false;
      }
      if (agent && !row.ag.includes(agent) && !(agent in row.r)) return false;
      const low = parseFloat(this.min.value), high = parseFloat(this.max.value);
      if (!Number.isNaN(low) || !Number.isNaN(high)) {
        const values = agent ? [row.r[agent]] : Object.values(row.r);
        const inside = values.some((v) => v !== undefined && v !== null &&
          (Number.isNaN(low) || v >= low) && (Number.isNaN(high) || v <= high));
        if (!inside) return false;
      }
      if (hay && !hay[pos].includes(this.text.value.trim().toLowerCase())) return false;
      return true;
    }

    async update() {
      const token = ++this.token;
      const agent = this.agent.value;
      this.rewardLabel.replaceChildren(this.data.rewardLabel, ...(agent ? [" of ", iso(agent)] : [" (any agent)"]));
      let hay = null;
      if (this.text.value.trim()) {
        this.count.textContent = "searching " + this.data.rows.length + " episodes…";
        try {
          hay = await haystack(this.key);
        } catch (error) {
          showError(this.view, error);
          return;
        }
        if (token !== this.token) return; // a newer filter is already on its way
      }
      const rows = this.data.rows;
      let chosen = [];
      for (let pos = 0; pos < rows.length; pos++) if (this.matches(rows[pos], hay, pos)) chosen.push(pos);
      const sort = this.sort.value;
      const reward = (pos) => {
        const r = rows[pos].r;
        if (agent) return r[agent] === undefined ? -Infinity : r[agent];
        return Object.values(r).reduce((a, b) => a + b, 0);
      };
      if (sort === "reward-desc") chosen.sort((a, b) => reward(b) - reward(a) || a - b);
      if (sort === "reward-asc") chosen.sort((a, b) => reward(a) - reward(b) || a - b);
      if (sort === "turns-desc") chosen.sort((a, b) => rows[b].t - rows[a].t || a - b);
      if (sort === "turns-asc") chosen.sort((a, b) => rows[a].t - rows[b].t || a - b);
      this.chosen = chosen;
      this.limit = PAGE_ROWS;
      this.root.dataset.matching = String(chosen.length);
      this.count.textContent = chosen.length + " of " + rows.length + " " + (this.data.noun || "episodes");
      this.draw();
    }

    draw() {
      const d = this.data;
      const fragment = document.createDocumentFragment();
      for (const pos of this.chosen.slice(0, this.limit)) {
        const row = d.rows[pos];
        const cells = [[String(row.i), null], [String(row.seed), null]]; // [text, class]
        if (this.hasOutcome) cells.push([row.s >= 1 ? "✓ succeeded" : row.s > 0 ? "partial " + num(row.s, 2) : "✗ failed", "outcome"]);
        cells.push([num(row.t, 0), "num"]);
        for (const a of d.agents) cells.push([a in row.r ? signed(row.r[a]) : "", "num"]);
        for (const x of row.x || []) cells.push([rich(x), null]); // (composed on the Python side)
        const sum = (o) => Object.values(o).reduce((a, b) => a + b, 0);
        cells.push([String(sum(row.fe) || ""), "num"], [String(sum(row.ce) || ""), "num"], [String(row.tok || ""), "num"]);
        const tr = h("tr", {
          class: "row" + (this.hasOutcome ? (row.s >= 1 ? " ok" : " fail") : ""),
          "data-pos": pos, "data-index": row.i, tabindex: "0",
          onclick: () => this.open(pos),
          onkeydown: (event) => { if (event.key === "Enter") this.open(pos); },
        }, cells.map(([text, cls]) => h("td", { class: cls }, text)));
        fragment.append(tr);
      }
      this.tbody.replaceChildren(fragment);
      const rest = this.chosen.length - Math.min(this.limit, this.chosen.length);
      this.more.hidden = rest <= 0;
      this.more.textContent = "show " + Math.min(rest, PAGE_ROWS) + " more (" + rest + " not shown)";
    }

    async open(pos) {
      for (const tr of this.tbody.querySelectorAll("tr.selected")) tr.classList.remove("selected");
      const tr = this.tbody.querySelector('tr[data-pos="' + pos + '"]');
      if (tr) tr.classList.add("selected");
      this.view.replaceChildren(h("p", { class: "note", text: "unpacking episode…" }));
      try {
        const detail = await unpack(this.key, pos);
        const episode = renderEpisode(detail, this.agent.value, () => this.view.replaceChildren());
        this.view.replaceChildren(episode);
        history.replaceState(null, "", "#ep/" + this.key + "/" + this.data.rows[pos].i);
        episode.scrollIntoView({ block: "start" });
      } catch (error) {
        this.view.replaceChildren();
        showError(this.view, error);
      }
    }

    openIndex(index) {
      const pos = this.data.rows.findIndex((row) => String(row.i) === String(index));
      if (pos >= 0) this.open(pos);
    }
  }

  // ------------------------------------------------------------------ runs compared: pairs by seed
  class PairList {
    constructor(root, spec) {
      this.root = root;
      this.spec = spec;
      this.limit = PAGE_ROWS;
      const option = (value, text) => h("option", { value: value, text: text });
      this.filter = h("select", { class: "f-pairs", onchange: () => this.update() },
        option("", "all pairs"), option("differ", "the runs differ"), option("outcome", "different outcome"),
        option("reward", "same outcome, different reward"), option("same", "identical results"));
      this.count = h("span", { class: "count" });
      root.append(h("div", { class: "filters" }, h("label", {}, "show ", this.filter), this.count));
      const head = ["seed"];
      for (const label of spec.labels) head.push(label);
      head.push("difference");
      this.tbody = h("tbody");
      this.more = h("button", { class: "more", type: "button", hidden: true, onclick: () => { this.limit += PAGE_ROWS; this.draw(); } });
      this.view = h("div", { class: "pair-view" });
      root.append(h("div", { class: "table-wrap" }, h("table", { class: "pair-list" },
        h("thead", {}, h("tr", {}, head.map((t) => h("th", { text: t })))), this.tbody)), this.more, this.view);
      root.pairList = this;
      this.update();
    }

    update() {
      const f = this.filter.value;
      this.chosen = this.spec.pairs.filter((p) => !f || (f === "differ" ? p.differs : f === "same" ? !p.differs : p.differs === f));
      this.root.dataset.matching = String(this.chosen.length);
      this.count.textContent = this.chosen.length + " of " + this.spec.pairs.length + " pairs";
      this.limit = PAGE_ROWS;
      this.draw();
    }

    cellText(key, pos) {
      const row = DATASETS[key].rows[pos];
      const outcome = row.s >= 1 ? "✓" : row.s > 0 ? num(row.s, 2) : "✗";
      return [outcome + " ", joined(Object.entries(row.r).map(([a, r]) => [iso(a), " " + signed(r, 2)]), " ")];
    }

    draw() {
      const fragment = document.createDocumentFragment();
      for (const pair of this.chosen.slice(0, this.limit)) {
        const cells = [h("td", { text: String(pair.seed) })];
        pair.cells.forEach((pos, k) => cells.push(h("td", {}, this.cellText(this.spec.datasets[k], pos))));
        cells.push(h("td", { class: pair.differs ? "differs" : null,
          text: pair.differs === "outcome" ? "outcome" : pair.differs === "reward" ? "reward (" + num(pair.spread, 3) + ")" : "same" }));
        fragment.append(h("tr", { class: "row" + (pair.differs ? " differ" : ""), "data-seed": pair.seed, tabindex: "0",
          onclick: () => this.open(pair), onkeydown: (event) => { if (event.key === "Enter") this.open(pair); } }, cells));
      }
      this.tbody.replaceChildren(fragment);
      const rest = this.chosen.length - Math.min(this.limit, this.chosen.length);
      this.more.hidden = rest <= 0;
      this.more.textContent = "show " + Math.min(rest, PAGE_ROWS) + " more (" + rest + " not shown)";
    }

    async open(pair) {
      this.view.replaceChildren(h("p", { class: "note", text: "unpacking episodes…" }));
      try {
        const details = await Promise.all(pair.cells.map((pos, k) => unpack(this.spec.datasets[k], pos)));
        const grid = h("div", { class: "side-by-side", style: "--runs:" + details.length });
        details.forEach((detail, k) => grid.append(renderEpisode(detail, "", null, [iso(this.spec.labels[k]), " · episode #" + detail.index])));
        this.view.replaceChildren(h("div", { class: "episode-head" }, h("h3", {}, "seed " + pair.seed, pair.env ? [" · ", iso(pair.env)] : null),
          h("button", { class: "close", type: "button", text: "close", onclick: () => this.view.replaceChildren() })), grid);
        history.replaceState(null, "", "#pair/" + pair.seed);
        this.view.scrollIntoView({ block: "start" });
      } catch (error) {
        this.view.replaceChildren();
        showError(this.view, error);
      }
    }
  }

  // ------------------------------------------------------------------ start
  function startLists(scope) {
    for (const root of scope.querySelectorAll(".episodes[data-dataset]")) {
      if (!root.episodeList && !root.closest("[hidden]") && DATASETS[root.dataset.dataset]) {
        new EpisodeList(root, root.dataset.dataset);
      }
    }
  }

  function startSwitches() {
    for (const box of document.querySelectorAll(".switch")) {
      const select = box.querySelector(".switch-select");
      const show = () => {
        for (const panel of box.querySelectorAll(".switch-panel")) panel.hidden = panel.dataset.panel !== select.value;
        startLists(box);
      };
      select.addEventListener("change", show);
      show();
    }
  }

  function followHash() {
    const parts = decodeURIComponent(location.hash.slice(1)).split("/");
    if (parts[0] === "ep" && parts.length === 3) {
      const root = document.querySelector('.episodes[data-dataset="' + CSS.escape(parts[1]) + '"]');
      if (!root) return;
      const panel = root.closest(".switch-panel");
      if (panel) {
        const select = panel.closest(".switch").querySelector(".switch-select");
        select.value = panel.dataset.panel;
        select.dispatchEvent(new Event("change"));
      }
      if (root.episodeList) root.episodeList.openIndex(parts[2]);
    } else if (parts[0] === "pair" && parts.length === 2) {
      for (const root of document.querySelectorAll(".pairs")) {
        const pair = root.pairList && root.pairList.spec.pairs.find((p) => String(p.seed) === parts[1]);
        if (pair) root.pairList.open(pair);
      }
    }
  }

  try {
    startSwitches();
    startLists(document);
    for (const root of document.querySelectorAll(".pairs[data-pairs]")) {
      const spec = (DATA.compare || {})[root.dataset.pairs];
      if (spec) new PairList(root, spec);
    }
    followHash();
  } catch (error) {
    showError(document.querySelector("main"), error);
  }
  document.body.dataset.ready = "1";
  if (window.performance && performance.mark) performance.mark("report-ready");
})();
