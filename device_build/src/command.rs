//! How a build says what it ran: each compiler or linker call as one line
//! a reader can paste into a shell, so that nobody has to open this crate
//! to learn the command (as a Makefile shows its nvcc line).

use std::path::{Path, PathBuf};

use common::RankContext;

use crate::cache;

/// The commands a build ran, each with the directory it ran in. A build
/// runs in a private directory that is then renamed into the cache:
/// [`lines_in`](Self::lines_in) names the directory the files are in now.
#[derive(Default)]
pub struct Ran(std::cell::RefCell<Vec<(PathBuf, String)>>);

impl Ran {
    /// Records `line`, run in (or naming) the build directory `dir`.
    pub fn record(&self, dir: &Path, line: String) {
        self.0.borrow_mut().push((dir.to_path_buf(), line));
    }

    /// The lines, with the directory they ran in replaced by `dir`.
    pub fn lines_in(&self, dir: &Path) -> Vec<String> {
        let now = dir.display().to_string();
        self.0
            .borrow()
            .iter()
            .map(|(ran_in, line)| line.replace(&ran_in.display().to_string(), &now))
            .collect()
    }
}

/// What a build says it did, one `note:` line each: `note: ran: <command>`
/// for each command it ran, or, when the cache held the build (nothing
/// ran), `note: cached: <file>` for each file the program uses from it.
pub fn notes(compiled: bool, commands: &[String], files: &[PathBuf]) -> Vec<String> {
    if compiled {
        commands.iter().map(|c| format!("note: ran: {c}")).collect()
    } else {
        files
            .iter()
            .map(|f| format!("note: cached: {}", f.display()))
            .collect()
    }
}

/// What a route's build did and how long it took, as every route says it:
/// `note: module built in 6.99 s (route nvshmem, sm_90)`, or `note: module
/// reused from the cache in 0.01 s (...)`.
pub fn module_note(build: &cache::Built, route: &str, arch: &str) -> String {
    let how = if build.compiled {
        "built"
    } else {
        "reused from the cache"
    };
    format!(
        "note: module {how} in {:.2} s (route {route}, {arch})",
        build.seconds
    )
}

/// `lines` on stderr, on rank 0 only: how every build's notes are printed.
pub fn print_on_root(ctx: &RankContext, lines: impl IntoIterator<Item = String>) {
    if ctx.is_root() {
        for line in lines {
            eprintln!("{line}");
        }
    }
}

/// `cd DIR && PROGRAM ARGS...`, each word quoted for a POSIX shell where
/// it needs to be: the line a reader can paste to run the same command.
pub fn command_line(dir: &Path, program: &Path, args: &[String]) -> String {
    let mut words = vec![
        "cd".to_string(),
        shell_word(&dir.display().to_string()),
        "&&".into(),
        shell_word(&program.display().to_string()),
    ];
    words.extend(args.iter().map(|a| shell_word(a)));
    words.join(" ")
}

/// `word`, single-quoted if a shell would otherwise split or expand it.
pub fn shell_word(word: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_-./=:,+@%".contains(c);
    if !word.is_empty() && word.chars().all(plain) {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every route says what its build did in these words (lesson 06 and
    /// 06b/06c print them; the READMEs quote them).
    #[test]
    fn the_module_note_says_built_or_reused_with_route_and_arch() {
        let built = cache::Built::record("/cache/3f2a".into(), true, 6.987);
        assert_eq!(
            module_note(&built, "nvshmem", "sm_90"),
            "note: module built in 6.99 s (route nvshmem, sm_90)"
        );
        let cached = cache::Built::record("/cache/3f2a".into(), false, 0.0041);
        assert_eq!(
            module_note(&cached, "nvcc", "sm_90"),
            "note: module reused from the cache in 0.00 s (route nvcc, sm_90)"
        );
    }
}
