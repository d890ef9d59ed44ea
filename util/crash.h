#pragma once
/* Fatal-signal report: a crash of the daemon (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT)
 * writes the signal and a backtrace to stderr (the daemon's log) before it dies as the
 * signal would have it, so a crash in CI or on an appliance leaves its cause behind. */
void crash_report_install(void);
