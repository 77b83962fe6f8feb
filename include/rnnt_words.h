/* rnnt_words.h — words with times from a decoded utterance, and subtitle documents (SRT, WebVTT) of them.
 * A word is a maximal run of token text between word boundaries (U+2581, FORMAT.md tokens.txt); its
 * start is the emission time of its first token, its end the end of the encoder frame of its last
 * token (frame + 1, times frame_shift_s), never past the utterance. Emission times of a transducer lag
 * the sound a little: these are the model's alignment, not a forced alignment.
 * Thread-safe: no shared state. */
#ifndef RNNT_WORDS_H
#define RNNT_WORDS_H

#include "rnnt.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    char *text;        /* UTF-8, NUL-terminated */
    double start_s, end_s;
    int first_token, n_tokens; /* the tokens of res->tokens it was made of */
    double confidence; /* the geometric mean of its tokens' probabilities (res->probs), in (0, 1];
                          -1 when the result has no probabilities (rnnt_result.probs NULL) */
} rnnt_word;

/* *words is malloc'd (NULL when there are none); release with rnnt_words_free. */
RNNT_API rnnt_status rnnt_result_words(const rnnt_model *m, const rnnt_result *res, rnnt_word **words, int *n_words, char *err, size_t errlen);
RNNT_API void rnnt_words_free(rnnt_word *words, int n_words);

typedef enum { RNNT_SUBS_SRT = 0, RNNT_SUBS_VTT = 1 } rnnt_subtitle_kind;
/* A subtitle document: cues of at most max_words words (0 = 12), a new cue also after a pause of
 * more than 1 s between words. malloc'd, NUL-terminated; NULL when out of memory. An empty word list
 * gives an empty SRT document or a bare "WEBVTT" header. */
RNNT_API char *rnnt_subtitles(rnnt_subtitle_kind kind, const rnnt_word *words, int n_words, int max_words);

#ifdef __cplusplus
}
#endif
#endif
