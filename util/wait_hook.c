/* The per-thread wait hook (wait_hook.h). */
#include "util/wait_hook.h"

__thread struct nasd_wait_hook nasd_wait_hook;
