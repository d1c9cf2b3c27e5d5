"""Generic shrinking rules for audio sub-configs (run after conformance.cases.tiny's).

Contract: `shrink_audio(tree)` takes the already-shrunk `to_dict()` tree and
returns it with audio sizes made tiny while keeping the invariants audio
encoders rely on. Identity for trees without audio parts. Rules, per
config node:

* ``max_source_positions`` (encoder frames after the stride-2 conv stack of
  Whisper-style encoders) becomes `SOURCE_POSITIONS`; the frame count the
  encoder requires (``2 * max_source_positions``) follows from it;
* mel-bin counts become `MEL_BINS` (a multiple of 8, so frequency
  subsampling by 2, 4 or 8 stays exact);
* codebook sizes (``codebook_size``, ``audio_vocab_size``, ...) become
  `CODEBOOK`, so the embedding tables of multi-codebook models stay small;
  the number of codebooks is kept (models index codebooks by position);
* a conv codec's blocks per stage (``depths`` beside down/upsampling
  ratios) become 1; the stages themselves, and so the hop length, stay;
* depthwise conv groups (``upsample_groups``, one group per channel of a
  codec's hidden size) follow the shrunk hidden size.
"""

from __future__ import annotations

from typing import Any

SOURCE_POSITIONS = 32
MEL_BINS = 16
CODEBOOK = 64
MEL_KEYS = {"num_mel_bins", "n_mels", "num_mel_filters"}
RATIO_KEYS = ("downsampling_ratios", "upsampling_ratios")
DEPTHWISE_GROUP_KEYS = {"upsample_groups"}
CODEBOOK_KEYS = {"codebook_size", "audio_vocab_size", "num_codebook_entries", "codebook_vocab_size"}


def _shrink_node(node: dict) -> dict:
    out = {}
    for key, value in node.items():
        if isinstance(value, dict) and key not in ("id2label", "label2id"):
            out[key] = _shrink_node(value)
        elif key == "depths" and any(k in node for k in RATIO_KEYS) and all(isinstance(v, int) for v in value):
            out[key] = [1] * len(value)  # one block per codec stage; the stages (ratios) stay
        elif isinstance(value, list):
            out[key] = [_shrink_node(v) if isinstance(v, dict) else v for v in value]
        elif not isinstance(value, int) or isinstance(value, bool):
            out[key] = value
        elif key == "max_source_positions" and value > SOURCE_POSITIONS:
            out[key] = SOURCE_POSITIONS
        elif key in MEL_KEYS and value > MEL_BINS:
            out[key] = MEL_BINS
        elif key in CODEBOOK_KEYS and value > CODEBOOK:
            out[key] = CODEBOOK
        elif key in DEPTHWISE_GROUP_KEYS and isinstance(node.get("hidden_size"), int) and value > node["hidden_size"]:
            out[key] = node["hidden_size"]  # depthwise: one group per channel
        else:
            out[key] = value
    return out


def shrink_audio(tree: dict[str, Any]) -> dict[str, Any]:
    return _shrink_node(tree)
