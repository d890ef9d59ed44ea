# iSCSI target: CHAP needs MD5 from nettle (Debian package nettle-dev).
LDLIBS += -lnettle
