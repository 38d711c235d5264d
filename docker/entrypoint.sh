#!/bin/sh
# Every Loupe process starts here: what it writes (media, logs, checkpoints, the embedded servers' files) is its user's
# alone (issue 42), whatever the command.
umask 077
exec "$@"
