/* transcriptions.h — the OpenAI-compatible POST /v1/audio/transcriptions (its form fields and answer
 * shapes); the word list they share with the native answer is reply.h's reply_words_json.
 *
 * Form fields (multipart/form-data, server/multipart.h):
 *   file                      exactly one, the audio (any format audio_body.h takes); required
 *   model                     the loaded model's name, or "whisper-1" (the alias tools that hard-code
 *                             OpenAI's name send); optional (the loaded model); anything else is 400
 *   response_format           json (default) | text | verbose_json | srt | vtt
 *   timestamp_granularities[] word | segment, repeatable (verbose_json: none given = segment, as OpenAI)
 *   language                  en, english or en-XX (the model is English); any other is 400
 *   prompt, temperature       accepted and ignored (greedy decoding has neither a prompt nor a
 *                             temperature; temperature must still be a number in [0, 1])
 * Any other field, a field given twice (but the granularities), or a file in another field is 400.
 *
 * Answers: json {"text"}; text and srt/vtt as text; verbose_json {task, language, duration, text,
 * segments [{id, seek, start, end, text, tokens, temperature, avg_logprob, compression_ratio,
 * no_speech_prob}], words [{word, start, end, confidence}]}. Segments are the subtitle cues (at most
 * 12 words, a new one after a pause of more than 1 s); seek is 0 and temperature 0.0 (one greedy pass
 * over the whole file); avg_logprob is the mean natural log of the segment's tokens' probabilities
 * (null where the backend reports none); compression_ratio and no_speech_prob are null (a transducer
 * computes neither). Word confidence: the geometric mean of its tokens' probabilities (words.h).
 * Thread-safe: no shared state. */
#ifndef SRV_TRANSCRIPTIONS_H
#define SRV_TRANSCRIPTIONS_H

#include <jansson.h>

#include "multipart.h"
#include "reply.h"
#include "rnnt.h"

#define OAI_MAX_PARTS 16
#define OAI_FIELD_MAX 4096 /* bytes of a text field (prompt included) */
#define OAI_MODEL_ALIAS "whisper-1"

typedef enum { OAI_JSON = 0, OAI_TEXT, OAI_VERBOSE_JSON, OAI_SRT, OAI_VTT } oai_format;

typedef struct {
    oai_format format;
    int words, segments;  /* timestamp granularities asked for */
    const mp_part *file;  /* points into the parts given to oai_parse_form */
} oai_request;

/* Checks the form's parts. 0, or -1 with e set (400). */
int oai_parse_form(const mp_part *parts, int n, const char *model_name, oai_request *o, srv_err *e);

/* The answer for a decoded result: *body (malloc'd) of *len bytes and its Content-Type. 0, or -1 with
 * e set (500: out of memory). */
int oai_render(const oai_request *o, const rnnt_model *m, const rnnt_result *res, double duration_s, char **body, size_t *len,
               const char **content_type, srv_err *e);


#endif
