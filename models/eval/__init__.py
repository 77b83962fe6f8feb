"""rnntd_eval (models/eval): WER/CER of the reference and the C engine, audio parity, big-blank speed."""
