# pistis: the command-line client of server-min (host glibc build); see docs/api.md.
HOST_BINS += pistis
pistis_SRCS := pistis/main.c
pistis_LIBS := lib
