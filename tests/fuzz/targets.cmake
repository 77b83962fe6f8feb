# The libFuzzer targets, one line each (read by CMakeLists.txt, which registers the ctest runs, and by
# clang/CMakeLists.txt, which builds them):
#   rnntd_fuzz_target(NAME SOURCE.c... [LIBS rnnt_engine|rnntd_core|<pkg-config module>...] [SECONDS N])
# NAME's seeds live in corpus/NAME/ and its optional dictionary in dict/NAME.dict. SECONDS is the short
# run in the test suite (default RNNTD_FUZZ_SECONDS, 30). See README.md in this folder.
rnntd_fuzz_target(npy fuzz_npy.c LIBS rnntd_core)
rnntd_fuzz_target(json fuzz_json.c LIBS rnntd_core)
rnntd_fuzz_target(cfg fuzz_cfg.c LIBS rnntd_core)
rnntd_fuzz_target(safetensors fuzz_safetensors.c LIBS rnnt_engine)
rnntd_fuzz_target(model fuzz_model.c LIBS rnnt_engine)
# The HTTP head parser and chunked decoder (server/http_parse.c), from the transport branch.
rnntd_fuzz_target(http fuzz_http.c LIBS rnntd_core)
rnntd_fuzz_target(multipart fuzz_multipart.c LIBS rnntd_core)
# The WebSocket frame parser (server/ws.c): at once = in pieces, caps, UTF-8, close codes.
rnntd_fuzz_target(ws fuzz_ws.c LIBS rnntd_core)
