#pragma once
/* Start-up warnings about what nasd exposes beyond loopback without protection. */
#include "db/db.h"
#include "nasd/appliance/config.h"

/* Calls emit once per finding (a sentence for the log); returns the number of findings.
 * Findings: a service on a non-loopback address while REST auth is off, iSCSI exports
 * without CHAP or initiator list and NFS exports without a client list on such addresses. */
int nasd_exposure_check(const struct nasd_config *cfg, nasd_db *db, void (*emit)(void *arg, const char *msg),
                        void *arg);
