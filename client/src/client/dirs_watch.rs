//! Who hears of the directories meta's answers say a request changed (`msg/meta.rs`,
//! `DirsChanged`): one watcher per client, set once (the FUSE mount keeps their attributes, so
//! the getattr the kernel sends after every change in a directory needs no meta request).
//!
//! Invariant: the watcher runs on the task that awaited the answer, before the answer is
//! returned, so whoever acts on the answer next finds the directories already recorded. Not
//! here: what the watcher keeps (the mount's `dir_attrs.rs`).

use std::sync::OnceLock;

use t3fs_core::msg::meta::DirsChanged;

use super::Client;

/// A function told of every answer's changed directories.
pub type DirsWatcher = Box<dyn Fn(&DirsChanged) + Send + Sync>;

/// The client's one watcher slot.
#[derive(Default)]
pub(crate) struct DirsWatch(OnceLock<DirsWatcher>);

impl DirsWatch {
    /// Tells the watcher, if any, of `dirs` (nothing when no directory changed).
    pub(crate) fn tell(&self, dirs: &DirsChanged) {
        if let (false, Some(w)) = (dirs.dirs.is_empty(), self.0.get()) {
            w(dirs);
        }
    }
}

impl Client {
    /// Sets the function told of the directories each namespace answer says its request
    /// changed; false if one was set already (it stays).
    pub fn watch_dirs(&self, watcher: DirsWatcher) -> bool {
        self.dirs_watch.0.set(watcher).is_ok()
    }
}
