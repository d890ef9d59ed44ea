/* Fatal-signal report (crash.h): async-signal-safe writes and backtrace_symbols_fd only;
 * the handler runs once (SA_RESETHAND), on the main thread on a stack of its own (an
 * overflow of that stack still reports), and re-raises the signal for the default action
 * (core, exit status). Not in ASan builds: ASan's own SEGV report says more. */
#define _GNU_SOURCE   /* sigabbrev_np */
#include "util/crash.h"
#include <execinfo.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

static void put(const char *s) { ssize_t r = write(2, s, strlen(s)); (void)r; }

static void on_fatal(int sig)
{
    char num[8];
    int n = 0, v = sig;
    do num[n++] = (char)('0' + v % 10); while ((v /= 10) && n < 7);
    char msg[64] = "nasd: fatal signal ";
    size_t l = strlen(msg);
    while (n) msg[l++] = num[--n];
    msg[l] = 0;
    put(msg);
    put(" (");
    put(sigabbrev_np(sig) ? sigabbrev_np(sig) : "?");
    put("), backtrace:\n");
    void *frames[64];
    int nf = backtrace(frames, 64);
    backtrace_symbols_fd(frames, nf, 2);
    raise(sig);   /* SA_RESETHAND: the default action now */
}

void crash_report_install(void)
{
#ifdef __SANITIZE_ADDRESS__
    return;
#endif
    static char altstack[64 * 1024];
    stack_t ss = { .ss_sp = altstack, .ss_size = sizeof altstack };
    sigaltstack(&ss, NULL);
    void *warm[1];
    backtrace(warm, 1);   /* loads libgcc now: the first call may allocate, not safe in a handler */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_fatal;
    sa.sa_flags = SA_RESETHAND | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    int sigs[] = { SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT };
    for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++) sigaction(sigs[i], &sa, NULL);
}
