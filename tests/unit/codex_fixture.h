/*
 * codex_fixture.h: what Codex CLI (wire_api "responses") sends, for the
 * Responses tests: its apply_patch tool's Lark grammar, and a whole request
 * body of a later turn with every tool, item and field shape it uses
 * (namespace and custom tools, hosted tools, encrypted reasoning, custom
 * tool calls and their outputs, the bookkeeping fields).
 */
#ifndef HEARTH_TEST_CODEX_FIXTURE_H
#define HEARTH_TEST_CODEX_FIXTURE_H

/* codex-rs's tool_apply_patch.lark */
/* clang-format off */
#define CODEX_APPLY_PATCH_LARK \
    "start: begin_patch hunk+ end_patch\n" \
    "begin_patch: \"*** Begin Patch\" LF\n" \
    "end_patch: \"*** End Patch\" LF?\n" \
    "\n" \
    "hunk: add_hunk | delete_hunk | update_hunk\n" \
    "add_hunk: \"*** Add File: \" filename LF add_line+\n" \
    "delete_hunk: \"*** Delete File: \" filename LF\n" \
    "update_hunk: \"*** Update File: \" filename LF change_move? change?\n" \
    "\n" \
    "filename: /(.+)/\n" \
    "add_line: \"+\" /(.*)/ LF -> line\n" \
    "\n" \
    "change_move: \"*** Move to: \" filename LF\n" \
    "change: (change_context | change_line)+ eof_line?\n" \
    "change_context: (\"@@\" | \"@@ \" /(.+)/) LF\n" \
    "change_line: (\"+\" | \"-\" | \" \") /(.*)/ LF\n" \
    "eof_line: \"*** End of File\" LF\n" \
    "\n" \
    "%import common.LF\n"
/* clang-format on */

/* A Codex request body (JSON), the grammar above inside it. */
/* clang-format off */
#define CODEX_BODY \
    "{\"model\":\"gpt-5-codex\",\"instructions\":\"You are Codex, a coding agent.\",\"input\":[" \
    "{\"type\":\"message\",\"role\":\"developer\",\"content\":[{\"type\":\"input_text\",\"text\":\"<pe" \
    "rmissions instructions>sandbox: workspace-write</permissions instructions>\"}]},{" \
    "\"type\":\"message\",\"role\":\"user\",\"content\":[{\"type\":\"input_text\",\"text\":\"<environm" \
    "ent_context>\\n  <cwd>/repo</cwd>\\n</environment_context>\"}]},{\"type\":\"message\",\"" \
    "role\":\"user\",\"content\":[{\"type\":\"input_text\",\"text\":\"Fix the exit code.\"}]},{\"ty" \
    "pe\":\"reasoning\",\"id\":\"rs_1\",\"summary\":[{\"type\":\"summary_text\",\"text\":\"Looking\"}]" \
    ",\"content\":null,\"encrypted_content\":\"hearth.r1:SSBzaG91bGQgbG9vay4=\"},{\"type\":\"f" \
    "unction_call\",\"id\":\"fc_1\",\"name\":\"shell_command\",\"arguments\":\"{\\\"command\\\":\\\"cat" \
    " src/main.c\\\",\\\"workdir\\\":\\\"/repo\\\"}\",\"call_id\":\"call_1\"},{\"type\":\"function_call" \
    "_output\",\"call_id\":\"call_1\",\"output\":\"int main(void) { return 1; }\\n\"},{\"type\":\"" \
    "function_call\",\"name\":\"search\",\"namespace\":\"mcp__docs__\",\"arguments\":\"{\\\"q\\\":\\\"e" \
    "xit\\\"}\",\"call_id\":\"call_2\"},{\"type\":\"function_call_output\",\"call_id\":\"call_2\",\"o" \
    "utput\":\"none\"},{\"type\":\"custom_tool_call\",\"id\":\"ctc_1\",\"status\":\"completed\",\"cal" \
    "l_id\":\"call_3\",\"name\":\"apply_patch\",\"input\":\"*** Begin Patch\\n*** Update File: s" \
    "rc/main.c\\n@@\\n-int main(void) { return 1; }\\n+int main(void) { return 0; }\\n***" \
    " End Patch\"},{\"type\":\"custom_tool_call_output\",\"call_id\":\"call_3\",\"output\":\"Succ" \
    "ess. Updated the following files:\\nM src/main.c\\n\"},{\"type\":\"web_search_call\",\"i" \
    "d\":\"ws_1\",\"status\":\"completed\",\"action\":{\"type\":\"search\",\"query\":\"exit codes\"}}," \
    "{\"type\":\"message\",\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\",\"text\":\"Fi" \
    "xed.\"}]},{\"type\":\"message\",\"role\":\"user\",\"content\":[{\"type\":\"input_text\",\"text\":" \
    "\"Thanks. Run the tests.\"}]}],\"tools\":[{\"type\":\"function\",\"name\":\"shell_command\"," \
    "\"description\":\"Runs a shell command and returns its output.\",\"strict\":false,\"par" \
    "ameters\":{\"type\":\"object\",\"properties\":{\"command\":{\"type\":\"string\",\"description\"" \
    ":\"The shell script to execute\"},\"workdir\":{\"type\":\"string\"},\"timeout_ms\":{\"type\"" \
    ":\"number\"}},\"required\":[\"command\"],\"additionalProperties\":false}},{\"type\":\"funct" \
    "ion\",\"name\":\"update_plan\",\"description\":\"Updates the task plan.\",\"strict\":false," \
    "\"parameters\":{\"type\":\"object\",\"properties\":{\"explanation\":{\"type\":\"string\"},\"pla" \
    "n\":{\"type\":\"array\",\"items\":{\"type\":\"object\",\"properties\":{\"step\":{\"type\":\"string" \
    "\"},\"status\":{\"type\":\"string\",\"enum\":[\"pending\",\"in_progress\",\"completed\"]}},\"req" \
    "uired\":[\"step\",\"status\"],\"additionalProperties\":false}}},\"required\":[\"plan\"],\"ad" \
    "ditionalProperties\":false}},{\"type\":\"custom\",\"name\":\"apply_patch\",\"description\":" \
    "\"Use the `apply_patch` tool to edit files. This is a FREEFORM tool, so do not wr" \
    "ap the patch in JSON.\",\"format\":{\"type\":\"grammar\",\"syntax\":\"lark\",\"definition\":\"" \
    "start: begin_patch hunk+ end_patch\\nbegin_patch: \\\"*** Begin Patch\\\" LF\\nend_pat" \
    "ch: \\\"*** End Patch\\\" LF?\\n\\nhunk: add_hunk | delete_hunk | update_hunk\\nadd_hun" \
    "k: \\\"*** Add File: \\\" filename LF add_line+\\ndelete_hunk: \\\"*** Delete File: \\\" " \
    "filename LF\\nupdate_hunk: \\\"*** Update File: \\\" filename LF change_move? change?" \
    "\\n\\nfilename: /(.+)/\\nadd_line: \\\"+\\\" /(.*)/ LF -> line\\n\\nchange_move: \\\"*** Mo" \
    "ve to: \\\" filename LF\\nchange: (change_context | change_line)+ eof_line?\\nchange" \
    "_context: (\\\"@@\\\" | \\\"@@ \\\" /(.+)/) LF\\nchange_line: (\\\"+\\\" | \\\"-\\\" | \\\" \\\") /(." \
    "*)/ LF\\neof_line: \\\"*** End of File\\\" LF\\n\\n%import common.LF\\n\"}},{\"type\":\"name" \
    "space\",\"name\":\"mcp__docs__\",\"description\":\"Tools of the docs MCP server.\",\"tools" \
    "\":[{\"type\":\"function\",\"name\":\"search\",\"description\":\"Search the docs.\",\"paramete" \
    "rs\":{\"type\":\"object\",\"properties\":{\"q\":{\"type\":\"string\"}},\"required\":[\"q\"]}}]},{" \
    "\"type\":\"web_search\",\"external_web_access\":false},{\"type\":\"local_shell\"},{\"type\":" \
    "\"image_generation\",\"output_format\":\"png\"}],\"tool_choice\":\"auto\",\"parallel_tool_c" \
    "alls\":false,\"reasoning\":{\"effort\":\"medium\",\"summary\":\"auto\"},\"store\":false,\"stre" \
    "am\":true,\"include\":[\"reasoning.encrypted_content\"],\"prompt_cache_key\":\"0199a3f2-" \
    "7c1e-7d20-9b8e-0c6f5d2a1b3c\",\"text\":{\"verbosity\":\"low\"},\"client_metadata\":{\"x-co" \
    "dex-turn-metadata\":\"{\\\"turn\\\":3}\"},\"truncation\":\"auto\",\"max_tool_calls\":8,\"top_l" \
    "ogprobs\":0,\"service_tier\":\"auto\",\"safety_identifier\":\"user-123\",\"metadata\":{\"ses" \
    "sion\":\"s1\"},\"background\":false}"
/* clang-format on */

#endif
