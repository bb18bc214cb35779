/*
 * chatutil.h: what the chat-path unit tests share (test_oai_grammar,
 * test_anth_request): a byte vocabulary to compile grammars against, and
 * a chat template read from ../shared/templates.
 */
#ifndef HEARTH_CHATUTIL_H
#define HEARTH_CHATUTIL_H

struct chat_template;
struct grammar_vocab;

/* 256 one-byte tokens, then one end-of-generation token (id 256); free with grammar_vocab_free. */
struct grammar_vocab *tu_byte_vocab(void);

/* The template at rel under ../shared (free with chat_template_free); NULL, with a skip message
 * printed, when shared/ is absent. Fails the test when the file does not compile. */
struct chat_template *tu_load_template(const char *rel);

#endif
