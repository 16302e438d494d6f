//! How a build says what it ran: each compiler or linker call as one line
//! a reader can paste into a shell, so that nobody has to open this crate
//! to learn the command (as a Makefile shows its nvcc line).

use std::path::{Path, PathBuf};

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
