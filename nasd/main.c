#include "nasd/log.h"
int main(void) { log_info("placeholder"); return 0; }
