"""rnntd_corpus (models/corpus): the text and the synthetic speech of the training corpus."""
