# Where tests and test clusters take TCP ports from (source it): below the kernel's
# ephemeral range, which outgoing connections take ports from (a probed port in it was
# taken by one before the server bound it: 44_ and 83_ failed so). Sets PORTS_FROM and
# PORTS_TO (exclusive).
ports_range() {
  local lo=32768 hi=60999
  read -r lo hi < /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null
  PORTS_FROM=10000
  if [ "$lo" -gt 12000 ]; then PORTS_TO=$lo
  elif [ "$hi" -lt 63000 ]; then PORTS_FROM=$((hi + 1)) PORTS_TO=65500
  else PORTS_TO=60000; fi
}
