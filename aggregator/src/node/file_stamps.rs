//! What the files a config names looked like when it was put in force (`Config::named_files`):
//! size, modification time and inode, read from the file system without reading the files
//! (a geolocation database is tens of MB). A reload of an unchanged text builds again when a
//! stamp moved, so a renewed origin CA or a new geolocation database takes effect on SIGHUP,
//! as nginx re-reads its files on reload.

use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::time::SystemTime;

use lb_core::config::Config;

/// One file's stamp; `None` when it could not be read.
type Stamp = Option<(u64, Option<SystemTime>, u64)>;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct FileStamps(Vec<(PathBuf, Stamp)>);

impl FileStamps {
    /// The stamps of the files `config` names, now.
    pub(super) fn of(config: &Config) -> FileStamps {
        FileStamps(
            config
                .named_files()
                .into_iter()
                .map(|path| {
                    let stamp = std::fs::metadata(path)
                        .ok()
                        .map(|m| (m.len(), m.modified().ok(), m.ino()));
                    (path.to_path_buf(), stamp)
                })
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_named_file_rewritten_moves_its_stamp() {
        let dir = tempfile::tempdir().expect("dir");
        let ca = dir.path().join("origin-ca.pem");
        std::fs::write(&ca, "one").expect("write");
        let text = format!(
            "[[pools]]\nname = \"p\"\norigins = [{{ name = \"o\", address = \"127.0.0.1\" }}]\n\
             [[load_balancers]]\nname = \"www.example.test\"\ndefault_pools = [\"p\"]\n\
             fallback_pool = \"p\"\nproxied = true\norigin_tls = \"strict\"\norigin_ca_file = \"{}\"\n",
            ca.display()
        );
        let regions = lb_core::RegionsTable::embedded().expect("regions");
        let config = Config::parse("t.toml", &text, &regions).expect("config");
        let before = FileStamps::of(&config);
        assert_eq!(before, FileStamps::of(&config), "nothing changed");
        // A renewal as cert-manager or an operator's `mv` makes it: a new file of the same size
        // in place (another inode).
        let renewed = dir.path().join("renewed.pem");
        std::fs::write(&renewed, "two").expect("write");
        std::fs::rename(&renewed, &ca).expect("rename");
        assert_ne!(before, FileStamps::of(&config));
    }
}
