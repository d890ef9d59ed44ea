#pragma once
/* Background runner of periodic snapshot tasks and replication tasks (tables
 * snapshot_tasks, replication_tasks; REST in api/snapshot_tasks.c). A task whose
 * last_run is 0 is due at once. */
#include "nasd/appliance/appliance.h"
#include <stdbool.h>

struct snap_tasks;
struct snap_tasks *snap_tasks_start(struct appliance *a);   /* NULL: tasks do not run (logged) */
void snap_tasks_kick(struct snap_tasks *t);                  /* look for due tasks now */
/* Whether prefix is a replication task's own, "repl<id>" (a snapshot task may not take it:
 * retention would delete the replication's snapshots). */
bool snap_tasks_repl_prefix(const char *prefix);
void snap_tasks_stop(struct snap_tasks *t);
