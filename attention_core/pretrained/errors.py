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


def _chain(err: BaseException):
    seen = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        yield err
        err = err.__cause__ or err.__context__


def explain(err: BaseException, model: str, *, offline: bool = False) -> ModelLoadError:
    """Turn whatever transformers / huggingface_hub raised into one clear ModelLoadError."""
    if isinstance(err, ModelLoadError):
        return err
    names = {type(e).__name__ for e in _chain(err)}
    text = " ".join(str(e) for e in _chain(err))
    lowered = text.lower()
    bundled = "or pick a bundled model (minilm, smollm2), which needs no network"
    if "GatedRepoError" in names:
        return ModelLoadError(
            model,
            "this model is gated on the Hugging Face hub",
            "Accept its licence on huggingface.co and log in (HF_TOKEN), " + bundled,
        )
    if "RevisionNotFoundError" in names:
        return ModelLoadError(model, "the requested revision does not exist", "Check the branch, tag or commit")
    if "RepositoryNotFoundError" in names or "not a valid model identifier" in lowered:
        return ModelLoadError(
            model,
            "no such model on the Hugging Face hub (or it is private)",
            "Check the spelling, e.g. 'openai-community/gpt2', " + bundled,
        )
    if (
        offline
        or "LocalEntryNotFoundError" in names
        or "OfflineModeIsEnabled" in names
        or "couldn't connect" in lowered
    ):
        return ModelLoadError(
            model,
            "it is not in the local Hugging Face cache and the hub cannot be reached (offline)",
            "Connect to the internet once to download it, use a local folder, " + bundled,
        )
    if "safetensors" in lowered and ("no file" in lowered or "does not appear to have" in lowered):
        return ModelLoadError(
            model,
            "it has no safetensors weights (pickle .bin files are refused for safety)",
            "Pick a model that ships model.safetensors, or convert it with safetensors' converter",
        )
    if "trust_remote_code" in lowered or "custom code" in lowered:
        return ModelLoadError(
            model,
            "it needs custom code from its repository, which Attention Lens never runs",
            "Pick a model whose architecture transformers supports natively",
        )
    if "does not recognize this architecture" in lowered or "unrecognized" in lowered:
        return ModelLoadError(
            model,
            "transformers does not know this architecture",
            "Pick a BERT-, GPT-2- or Llama-like model, " + bundled,
        )
    first = str(err).strip().splitlines()[0] if str(err).strip() else ""
    return ModelLoadError(
        model,
        f"loading failed with {type(err).__name__}: {first[:300]}",
        "Check that it is a Hugging Face transformers model folder or id",
    )
