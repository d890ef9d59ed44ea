#!/bin/sh
# Seed corpus for the rest harness: method byte (0 GET 1 POST 2 PATCH 3 DELETE
# 4 OPTIONS 5 PUT), "path[?query]\n", JSON body. The harness provides pool "tank".
d=$1
s() { printf "$2" > "$d/$1"; }
s get_pools '\000pools\n'
s get_pool '\000pools/tank'
s get_system '\000system'
s settings '\002system/settings\n{"log_level":"debug"}'
s dataset '\001datasets\n{"pool":"tank","name":"share","quota":"64M","mode":"0775","uid":1000}'
s dataset_list '\000datasets?pool=tank'
s dataset_patch '\002datasets/tank/share\n{"quota":"32M"}'
s volume '\001volumes\n{"pool":"tank","name":"vm1","size":"16M","compression":"lz4"}'
s volume_patch '\002volumes/tank/vm1\n{"size":"32M"}'
s iscsi '\001exports/iscsi\n{"name":"vm1","volume":"tank/vm1","initiators":["iqn.1993-08.org.debian:01:host"],"chap_user":"alice","chap_secret":"alicesecret12"}'
s iscsi_luns '\001exports/iscsi\n{"name":"t2","iqn":"iqn.2026-12.io.nasd:t2","luns":[{"lun":0,"volume":"tank/vm1"}]}'
s nfs '\001exports/nfs\n{"dataset":"tank/share","clients":["127.0.0.0/8","::1/128"],"root_squash":true}'
s nfs_patch '\002exports/nfs/tank_share\n{"read_only":true,"anonuid":1}'
s scrub '\001pools/tank/scrub\n'
s offline '\001pools/tank/offline\n{"member":0}'
s import '\001pools/tank2/import\n{"members":["/tmp/nasd-fuzz-rest/m1.img"]}'
s tokens '\001tokens\n{"description":"fuzz"}'
s del_token '\003tokens/1'
s del_ds '\003datasets/tank/share'
s options '\004exports/nfs/1'
s put '\005pools'
s pool2 '\001pools\n{"name":"p2","layout":"mirror","members":[{"path":"/tmp/nasd-fuzz-rest/a.img","size":"64M","create":true},{"path":"/tmp/nasd-fuzz-rest/b.img","size":"64M","create":true}]}'
s selftest '\001exports/nfs/1/selftest\n{"pattern":"4k-randread","seconds":1,"queue_depth":4}'
s replace '\001pools/tank/replace\n{"member":0,"path":"/tmp/nasd-fuzz-rest/r0.img","size":"128M","create":true}'
