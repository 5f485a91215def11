"""Tiny random models of each family, saved as real Hugging Face folders, for tests.

``build_tiny_model("llama", folder)`` writes config, safetensors weights and a small tokenizer in
well under a second, no network needed. Weights are redrawn with a larger spread than the usual
initialisation so attention patterns are peaked, not flat, which makes replay tests meaningful.

Families: bert, roberta, distilbert, electra (WordPiece tokenizer, [CLS] ... [SEP]); gpt2, llama
(grouped-query: 4 query heads, 2 key/value heads), qwen2 (q/k/v biases), mistral (sliding window 4),
gpt_neox (a layout Attention Lens does not capture q/k/v for) (byte-level BPE tokenizer).
"""

from __future__ import annotations

from pathlib import Path

import torch

TINY_FAMILIES = ("bert", "roberta", "distilbert", "electra", "gpt2", "llama", "qwen2", "mistral", "gpt_neox")
MAX_POSITIONS = 64
_WORDS = (
    "the a cat cats dog sat on mat walk walking talked they were happy un believ able ably . , ! ? - "
    "attention is all you need to see how tokens look at each other"
).split()
_CORPUS = [
    "The cat sat on the mat. The dog sat on the cat.",
    "They were walking and talking; attention is all you need.",
    "Tokens look at each other: queries, keys and values.\nA new line!",
    "Café, naïve, über: bytes beyond ASCII.",
]


def wordpiece_tokenizer(max_length: int = MAX_POSITIONS):
    """A BERT-style WordPiece tokenizer over a few dozen words (with ## pieces), wrapped for transformers."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    pieces = ["##s", "##ing", "##ed", "##able", "##ably", "##y", "##e", "##t", "##a", "##l", "##k"]
    vocab = {token: i for i, token in enumerate([*specials, *_WORDS, *pieces])}
    tokenizer = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.decoder = decoders.WordPiece()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
        model_max_length=max_length,
    )


def byte_level_tokenizer(*, add_bos: bool, max_length: int = MAX_POSITIONS):
    """A GPT-2-style byte-level BPE tokenizer trained on four sentences (Ġ = space, Ċ = newline)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=320,
        special_tokens=["<s>", "</s>", "<pad>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(_CORPUS, trainer=trainer)
    if add_bos:
        tokenizer.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 0)])
    else:
        tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        unk_token=None,
        model_max_length=max_length,
    )


def _model(family: str, vocab_size: int, pad_id: int, bos_id: int | None, eos_id: int | None):
    import transformers as tf

    small = {"num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 64, "hidden_size": 32}
    causal = {
        "bos_token_id": bos_id,
        "eos_token_id": eos_id,
        "pad_token_id": pad_id,
        "vocab_size": vocab_size,
        "max_position_embeddings": MAX_POSITIONS,
    }
    gqa = {**small, **causal, "num_key_value_heads": 2}
    if family == "bert":
        return tf.BertModel, tf.BertConfig(
            vocab_size=vocab_size, max_position_embeddings=MAX_POSITIONS, pad_token_id=pad_id, **small
        )
    if family == "roberta":
        return tf.RobertaModel, tf.RobertaConfig(
            vocab_size=vocab_size, pad_token_id=pad_id, max_position_embeddings=MAX_POSITIONS + pad_id + 1, **small
        )
    if family == "distilbert":
        return tf.DistilBertModel, tf.DistilBertConfig(
            vocab_size=vocab_size,
            dim=32,
            n_layers=2,
            n_heads=4,
            hidden_dim=64,
            max_position_embeddings=MAX_POSITIONS,
            pad_token_id=pad_id,
        )
    if family == "electra":
        return tf.ElectraModel, tf.ElectraConfig(
            vocab_size=vocab_size,
            embedding_size=16,
            max_position_embeddings=MAX_POSITIONS,
            pad_token_id=pad_id,
            **small,
        )
    if family == "gpt2":
        return tf.GPT2LMHeadModel, tf.GPT2Config(
            vocab_size=vocab_size,
            n_embd=32,
            n_layer=2,
            n_head=4,
            n_positions=MAX_POSITIONS,
            bos_token_id=bos_id,
            eos_token_id=eos_id,
            scale_attn_by_inverse_layer_idx=True,
        )
    if family == "llama":
        return tf.LlamaForCausalLM, tf.LlamaConfig(**gqa)
    if family == "qwen2":
        return tf.Qwen2ForCausalLM, tf.Qwen2Config(**gqa)
    if family == "mistral":
        return tf.MistralForCausalLM, tf.MistralConfig(**gqa, sliding_window=4)
    if family == "gpt_neox":
        return tf.GPTNeoXForCausalLM, tf.GPTNeoXConfig(**small, **causal)
    raise ValueError(f"unknown tiny family {family!r}; choose from {TINY_FAMILIES}")


def build_tiny_model(family: str, folder: str | Path, *, seed: int = 0, spread: float = 0.2) -> Path:
    """Write a tiny random ``family`` model (2 layers, d_model 32, 4 heads) and its tokenizer to ``folder``."""
    folder = Path(folder)
    wordpiece = family in ("bert", "roberta", "distilbert", "electra")
    tokenizer = wordpiece_tokenizer() if wordpiece else byte_level_tokenizer(add_bos=family != "gpt2")
    bos = None if wordpiece else tokenizer.bos_token_id
    eos = None if wordpiece else tokenizer.eos_token_id
    cls, config = _model(family, len(tokenizer), tokenizer.pad_token_id, bos, eos)
    torch.manual_seed(seed)
    model = cls._from_config(config, attn_implementation="eager")
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, torch.nn.Embedding):
                continue  # token and position tables keep their init; norms follow them
            for parameter in module.parameters(recurse=False):
                if parameter.dim() >= 2:
                    parameter.normal_(0.0, spread)  # peaked attention, not the flat patterns of std 0.02
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
