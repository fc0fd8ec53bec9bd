"""The built-in engine's tools, all confined to the session's worktree.

`read_file`, `list_dir` (`files`), `find_files`, `grep_files` (`search`) read;
`write_file` and `edit_file` (`files`) change files (an existing file must
have been read in this run before `write_file` replaces it; `edit_file`
replaces exactly one match); `shell` runs `bash -c` in the worktree with a
scrubbed environment, in its own process group that is killed on timeout or
cancel; `ask_user` parks the run on the question gate; `report_no_change`
nominates a no-change finding (refused once anything changed). The
`Workbench` passes every call through the inspector chain
(`supervisor.governance.chain`) first; a denial becomes the tool's result.

Outputs are capped so one call cannot flood the model's context. Errors are
results too: the model reads a sentence saying what to do instead.
"""
