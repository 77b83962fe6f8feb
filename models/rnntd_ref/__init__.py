"""rnntd_ref: the PyTorch reference (the oracle) for the rnntd model format, models/FORMAT.md.

Modules: safetensors_io (read/write weights), config (model.yaml), model (RNNTModel), decode (greedy
multi-blank decoding, detokenize), io (model directories, export), random_model, golden.
"""
