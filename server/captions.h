/* captions.h — the live-captions page served at GET /captions (static, compiled in).
 * Thread-safe: the page is read-only. */
#ifndef SRV_CAPTIONS_H
#define SRV_CAPTIONS_H

#include <stddef.h>

/* The page (HTML with its script), static; *len its length. */
const char *captions_page(size_t *len);

#endif
