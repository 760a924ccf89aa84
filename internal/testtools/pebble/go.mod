module github.com/adpnode/adpnode/internal/testtools/pebble

go 1.26.8

require github.com/letsencrypt/pebble/v2 v2.10.3
