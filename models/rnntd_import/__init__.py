"""rnntd_import: converters from other toolkits' LSTM transducers to the rnntd model format (FORMAT.md).

    python3 -m rnntd_import.mlperf CKPT.pt OUTDIR      # the MLPerf RNN-T reference checkpoint
    python3 -m rnntd_import.nemo MODEL.nemo OUTDIR     # NeMo LSTM transducers (.nemo)

Each prints what it mapped and what it verified; a checkpoint it cannot convert exactly gives one
line naming what is unsupported (CheckpointError) and writes nothing.
"""
