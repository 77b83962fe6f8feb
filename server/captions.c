/* captions.c — GET /captions: a live-captions page (microphone -> WebSocket /v1/stream -> captions),
 * static HTML + JS compiled into the binary. The page asks for the microphone, runs an AudioContext
 * at the model's rate (the browser resamples), sends float32 PCM every ~100 ms as binary messages
 * (encoding f32le) and shows finals (endpointing on) followed by the growing partial.
 * ?autostart=1 starts without the button (the headless-browser test). A browser WebSocket cannot send
 * an Authorization header, so with server.auth_token_file set the page cannot connect (README). */
#include "captions.h"

#include <string.h>

static const char page[] =
    "<!doctype html>\n"
    "<html lang=\"en\"><head><meta charset=\"utf-8\"><title>rnntd live captions</title>\n"
    "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
    "<style>body{font-family:sans-serif;max-width:50em;margin:2em auto;padding:0 1em}"
    "#captions{font-size:1.6em;line-height:1.4;min-height:6em;border:1px solid #ccc;padding:.5em}"
    "#partial{color:#777}#status{color:#555;font-size:.9em}</style></head>\n"
    "<body><h1>Live captions</h1>\n"
    "<p><button id=\"start\">Start</button> <button id=\"stop\" disabled>Stop</button> <span id=\"status\">idle</span></p>\n"
    "<div id=\"captions\"><span id=\"final\"></span> <span id=\"partial\"></span></div>\n"
    "<script>\n"
    "'use strict';\n"
    "const $ = id => document.getElementById(id);\n"
    "let ws = null, ctx = null, src = null, proc = null, stream = null;\n"
    "function status(t) { $('status').textContent = t; }\n"
    "async function start() {\n"
    "  $('start').disabled = true;\n"
    "  const health = await (await fetch('/health')).json();\n"
    "  const rate = health.model ? health.model.sample_rate : 16000;\n"
    "  stream = await navigator.mediaDevices.getUserMedia({audio: {channelCount: 1, echoCancellation: false,\n"
    "                                                             noiseSuppression: false, autoGainControl: false}});\n"
    "  ctx = new AudioContext({sampleRate: rate});\n"
    "  await ctx.resume();\n"
    "  const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';\n"
    "  ws = new WebSocket(proto + '//' + location.host + '/v1/stream');\n"
    "  ws.binaryType = 'arraybuffer';\n"
    "  ws.onopen = () => ws.send(JSON.stringify({type: 'config', encoding: 'f32le', sample_rate: ctx.sampleRate,\n"
    "                                            partials: true, endpointing: true}));\n"
    "  ws.onmessage = ev => {\n"
    "    const m = JSON.parse(ev.data);\n"
    "    if (m.type === 'ready') { status('listening (' + m.model + ')'); begin(); }\n"
    "    else if (m.type === 'partial') $('partial').textContent = m.text;\n"
    "    else if (m.type === 'final') {\n"
    "      if (m.text) $('final').textContent += ($('final').textContent ? ' ' : '') + m.text;\n"
    "      $('partial').textContent = '';\n"
    "    } else if (m.type === 'error') status('error: ' + m.error.code + ': ' + m.error.message);\n"
    "  };\n"
    "  ws.onclose = ev => { status('closed (' + ev.code + ')'); halt(); };\n"
    "  $('stop').disabled = false;\n"
    "}\n"
    "function begin() {\n"
    "  src = ctx.createMediaStreamSource(stream);\n"
    "  proc = ctx.createScriptProcessor(2048, 1, 1);\n"
    "  proc.onaudioprocess = ev => {\n"
    "    if (ws && ws.readyState === WebSocket.OPEN) ws.send(new Float32Array(ev.inputBuffer.getChannelData(0)).buffer);\n"
    "  };\n"
    "  src.connect(proc);\n"
    "  proc.connect(ctx.destination);\n"
    "}\n"
    "function halt() {\n"
    "  if (proc) proc.disconnect();\n"
    "  if (src) src.disconnect();\n"
    "  if (stream) stream.getTracks().forEach(t => t.stop());\n"
    "  if (ctx) ctx.close();\n"
    "  proc = src = stream = ctx = null;\n"
    "  $('start').disabled = false; $('stop').disabled = true;\n"
    "}\n"
    "function stop() { if (ws && ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify({type: 'eof'})); status('finishing'); }\n"
    "$('start').onclick = () => start().catch(e => { status('error: ' + e); halt(); });\n"
    "$('stop').onclick = stop;\n"
    "if (new URLSearchParams(location.search).get('autostart') === '1') $('start').click();\n"
    "</script></body></html>\n";

const char *captions_page(size_t *len)
{
    *len = sizeof page - 1;
    return page;
}
