//! The PostgreSQL installation the tests run against, found through `pg_config` (`PG_CONFIG`,
//! default the one on PATH): its directories, its major version and its server programs.

use std::path::PathBuf;
use std::process::Command;

use crate::host::describe;

/// A directory of the PostgreSQL installation the tests run against: `$PG_CONFIG flag`
/// (default `pg_config` on PATH), e.g. `--sharedir`, `--pkglibdir`.
pub fn pg_config(flag: &str) -> PathBuf {
    pg_config_dir(&pg_config_program(), flag)
}

/// The `pg_config` of the installation the tests run against: `$PG_CONFIG`, default the one on
/// PATH.
pub fn pg_config_program() -> String {
    std::env::var("PG_CONFIG").unwrap_or_else(|_| "pg_config".into())
}

/// The major version of the installation the tests run against (`pg_config --version`).
pub fn pg_major() -> u32 {
    let version = pg_config("--version");
    let version = version.to_string_lossy();
    version
        .strip_prefix("PostgreSQL ")
        .and_then(|rest| rest.split(['.', ' ']).next())
        .and_then(|major| major.parse().ok())
        .unwrap_or_else(|| panic!("no major version in pg_config --version: {version}"))
}

/// `pg_config flag` of a given `pg_config` program.
pub(crate) fn pg_config_dir(pg_config: &str, flag: &str) -> PathBuf {
    let output = Command::new(pg_config)
        .arg(flag)
        .output()
        .unwrap_or_else(|error| panic!("run {pg_config}: {error}"));
    assert!(
        output.status.success(),
        "{pg_config} {flag}: {}",
        describe(&output)
    );
    PathBuf::from(String::from_utf8_lossy(&output.stdout).trim())
}

/// The server's bin directory (initdb, pg_ctl, pg_dump, psql): `pg_config --bindir`.
pub fn postgres_bin_dir() -> PathBuf {
    pg_config("--bindir")
}
