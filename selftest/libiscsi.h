#pragma once
/* The libiscsi client headers. Plain <iscsi/iscsi.h> would find nasd's own
 * iscsi/iscsi.h first (the build passes -I.), so this file, itself included as
 * <selftest/libiscsi.h> via -I., continues the search after "." with include_next. */
#include_next <iscsi/iscsi.h>
#include_next <iscsi/scsi-lowlevel.h>
