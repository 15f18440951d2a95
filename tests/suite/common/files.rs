//! Files and directories for the tests: every test runs in this one process, so names carry a
//! counter besides the process id, and everything is removed when its handle drops (also when
//! the test panics).

use std::{
    path::{Path, PathBuf},
    sync::atomic::{AtomicU64, Ordering},
};

/// The repository's root (the tests run there: relative paths like `config/…` work too).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A path in the temp directory that no other test of this run uses (nor another run):
/// `mcp-gateway-test-<pid>-<n>-<name>`; `n` counts the paths handed out.
pub fn temp_path(name: &str) -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!("mcp-gateway-test-{}-{n}-{name}", std::process::id()))
}

/// A file at a [`temp_path`], removed on drop.
pub struct TempFile(PathBuf);

impl TempFile {
    /// The path only: nothing is written (for a file the test or a child process creates).
    pub fn new(name: &str) -> Self {
        Self(temp_path(name))
    }

    /// A file holding `contents`.
    pub fn with(name: &str, contents: impl AsRef<[u8]>) -> Self {
        let file = Self::new(name);
        std::fs::write(&file.0, contents)
            .unwrap_or_else(|e| panic!("cannot write {}: {e}", file.0.display()));
        file
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    /// The path as a string (for command lines and configuration).
    pub fn arg(&self) -> &str {
        self.0.to_str().expect("temp paths are UTF-8")
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A scratch directory at a [`temp_path`], removed on drop.
pub struct Scratch(PathBuf);

impl Scratch {
    pub fn new(what: &str) -> Self {
        let dir = temp_path(what);
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    /// The directory itself.
    pub fn dir(&self) -> &Path {
        &self.0
    }

    /// The path of `name` inside, as a string (for command lines and configuration).
    pub fn path(&self, name: &str) -> String {
        self.0.join(name).display().to_string()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
