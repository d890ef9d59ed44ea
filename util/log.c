/* Levelled logging to stderr, escaping of client strings, and a per-call-site rate limit
 * so that a fault repeated in a loop (accept: EMFILE) cannot flood the log. */
#include "util/log.h"
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

int nasd_log_level = LOG_INFO;
static const char *names[] = { "error", "warn", "info", "debug" };

int nasd_log_level_parse(const char *s)
{
    for (int i = 0; i < 4; i++)
        if (!strcasecmp(s, names[i])) return i;
    return -1;
}

size_t nasd_log_escape(const char *in, size_t inlen, char *out, size_t outlen)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    if (!outlen) return 0;
    for (size_t i = 0; in && i < inlen; i++) {
        unsigned char c = (unsigned char)in[i];
        if (c >= 0x20 && c < 0x7f && c != '\\') {
            if (o + 1 >= outlen) break;
            out[o++] = (char)c;
        } else if (c == '\\') {
            if (o + 2 >= outlen) break;
            out[o++] = '\\';
            out[o++] = '\\';
        } else {
            if (o + 4 >= outlen) break;
            out[o++] = '\\';
            out[o++] = 'x';
            out[o++] = hex[c >> 4];
            out[o++] = hex[c & 15];
        }
    }
    out[o] = 0;
    return o;
}

/* Rate limit: a token bucket per format string (one per call site), LIMIT_BURST lines at
 * once and LIMIT_RATE per second after; the next line that passes says how many were
 * dropped. Debug lines are not limited: they are asked for. */
#define LIMIT_SLOTS 256
#define LIMIT_PROBE 8
#define LIMIT_BURST 20.0
#define LIMIT_RATE 5.0
static struct {
    const char *fmt;
    double tokens, last;
    unsigned long dropped;
} slots[LIMIT_SLOTS];
static pthread_mutex_t limit_lock = PTHREAD_MUTEX_INITIALIZER;

/* Returns 0 to drop the line, otherwise 1 with *dropped = lines dropped since the last one. */
static int limit_pass(const char *fmt, unsigned long *dropped)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    double now = ts.tv_sec + ts.tv_nsec / 1e9;
    unsigned h0 = (unsigned)(((uintptr_t)fmt >> 3) * 2654435761u), h = h0 % LIMIT_SLOTS;
    int pass = 1;
    *dropped = 0;
    pthread_mutex_lock(&limit_lock);
    for (unsigned i = 0; i < LIMIT_PROBE; i++) { /* the site's slot, else the stalest nearby */
        unsigned s = (h0 + i) % LIMIT_SLOTS;
        if (slots[s].fmt == fmt) { h = s; break; }
        if (slots[s].last < slots[h].last) h = s;
    }
    if (slots[h].fmt != fmt) {
        slots[h].fmt = fmt;
        slots[h].tokens = LIMIT_BURST;
        slots[h].last = now;
        slots[h].dropped = 0;
    }
    slots[h].tokens += (now - slots[h].last) * LIMIT_RATE;
    if (slots[h].tokens > LIMIT_BURST) slots[h].tokens = LIMIT_BURST;
    slots[h].last = now;
    if (slots[h].tokens >= 1.0) {
        slots[h].tokens -= 1.0;
        *dropped = slots[h].dropped;
        slots[h].dropped = 0;
    } else {
        slots[h].dropped++;
        pass = 0;
    }
    pthread_mutex_unlock(&limit_lock);
    return pass;
}

void nasd_log(int level, const char *fmt, ...)
{
    if (level > nasd_log_level) return;
    unsigned long dropped = 0;
    if (level < LOG_DEBUG && !limit_pass(fmt, &dropped)) return;
    char line[2048];
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    localtime_r(&ts.tv_sec, &tm);
    int n = snprintf(line, sizeof line, "%02d:%02d:%02d.%03ld %-5s ", tm.tm_hour, tm.tm_min,
                     tm.tm_sec, ts.tv_nsec / 1000000, names[level]);
    va_list ap;
    va_start(ap, fmt);
    n += vsnprintf(line + n, sizeof line - n - 1, fmt, ap);
    va_end(ap);
    if (n > (int)sizeof line - 2) n = sizeof line - 2;
    if (dropped) {
        int m = snprintf(line + n, sizeof line - n - 1, " (%lu similar lines suppressed)", dropped);
        n += m;
        if (n > (int)sizeof line - 2) n = sizeof line - 2;
    }
    line[n++] = '\n';
    (void)!write(2, line, n); /* one write keeps lines whole across threads */
}
