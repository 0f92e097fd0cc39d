"""Advantage estimators and loss terms (pure tensor functions, no models)."""

from llm_trainers.algorithms.advantages import *  # noqa: F401,F403
from llm_trainers.algorithms.advantages import __all__ as _adv_all
from llm_trainers.algorithms.losses import *  # noqa: F401,F403
from llm_trainers.algorithms.losses import __all__ as _loss_all

__all__ = [*_adv_all, *_loss_all]
