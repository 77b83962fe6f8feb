"""rnntd_train (models/train): the log-mel frontend, the multi-blank RNN-T loss, the training model and its loop."""
