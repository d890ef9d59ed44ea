#pragma once
/* Background runner of periodic snapshot tasks and replication tasks (tables
 * snapshot_tasks, replication_tasks; REST in api/snapshot_tasks.c). A task whose
 * last_run is 0 is due at once. */
#include "nasd/appliance/appliance.h"

struct snap_tasks;
struct snap_tasks *snap_tasks_start(struct appliance *a);   /* NULL: tasks do not run (logged) */
void snap_tasks_kick(struct snap_tasks *t);                  /* look for due tasks now */
void snap_tasks_stop(struct snap_tasks *t);
