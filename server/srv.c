/* srv.c — access to the daemon's shared state. */
#include "srv.h"

eng *srv_engine(srv *s)
{
    pthread_mutex_lock(&s->mu);
    eng *e = eng_ref(s->engine);
    pthread_mutex_unlock(&s->mu);
    return e;
}
