"""One exception for every way a real model can fail to load or be captured."""

from __future__ import annotations


class ModelLoadError(ValueError):
    """A model could not be loaded or inspected.

    The message always names the model, says what went wrong and what to do about it, so the app
    can show it to a person as it is. ``model``, ``problem`` and ``remedy`` hold the three parts.
    """

    def __init__(self, model: str, problem: str, remedy: str = "") -> None:
        self.model = str(model)
        self.problem = problem.rstrip(".")
        self.remedy = remedy.rstrip(".")
        message = f"Model {self.model!r}: {self.problem}."
        if self.remedy:
            message += f" {self.remedy}."
        super().__init__(message)
