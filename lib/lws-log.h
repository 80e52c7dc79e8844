#pragma once
/* libwebsockets' own log lines, through lib/log.c: its default emitter writes to stderr
 * as it is, so a peer's bytes it quotes ("No supported protocol \"…\"", before any token
 * was shown) reached the log raw, and a line without its end glued the next record to it.
 * Here each line is stripped of its end, escaped and formatted like every other line (JSON
 * with --log-format json), and at most LWS_LOG_BURST lines a second are written: anyone who
 * reaches a listener can make libwebsockets complain as fast as it connects. The next line
 * after a held-back stretch says how many were left out. */
#define LWS_LOG_BURST 10

/* lws_set_log_level with this emitter: errors, and warnings and notices too when our own
 * level is debug (-v). */
void log_lws_setup(void);

/* Says how many lines are still held back, if any: once the context is destroyed, so a
 * stretch of dropped lines is never lost without a word at exit. */
void log_lws_flush(void);

/* The emitter itself (tests): level is libwebsockets' LLL_* bit, line its text. */
void log_lws_emit(int level, const char *line);
