//! The reservation file (docs/design.md §5): a time that no issued ID's tick exceeds, kept in the
//! data directory so it survives restarts and crashes. Plain Rust file I/O, no pgrx, so it is
//! tested with ordinary unit tests.
//!
//! Written atomically: temp file, fsync, rename over the old one, fsync the directory. A
//! missing file means a new cluster; anything that is not exactly what `write` produces is
//! reported as corrupt, never silently ignored.

use std::fmt;
use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// File name inside the data directory.
pub const FILE_NAME: &str = "snowflake_id.reservation";
const HEADER: &str = "snowflake_id reservation v1";
const KEY: &str = "reserved_until_unix_us=";

#[derive(Debug)]
pub enum ReadError {
    Unreadable(io::Error),
    Corrupt(String),
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::Unreadable(error) => write!(f, "it cannot be read: {error}"),
            ReadError::Corrupt(why) => write!(f, "it is corrupt: {why}"),
        }
    }
}

/// A failed write: which file (or the directory) failed, and why.
#[derive(Debug)]
pub struct WriteError {
    pub path: PathBuf,
    pub error: io::Error,
}

impl fmt::Display for WriteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.error)
    }
}

impl std::error::Error for WriteError {}

/// The exact text of a reservation file holding `reserved_until_unix_us`.
pub fn encode(reserved_until_unix_us: i64) -> String {
    format!("{HEADER}\n{KEY}{reserved_until_unix_us}\n")
}

fn decode(text: &str) -> Result<i64, ReadError> {
    let corrupt = |why: &str| ReadError::Corrupt(why.to_owned());
    let mut lines = text.split_terminator('\n');
    if lines.next() != Some(HEADER) {
        return Err(corrupt("the first line is not the reservation header"));
    }
    let value = lines
        .next()
        .and_then(|line| line.strip_prefix(KEY))
        .ok_or_else(|| corrupt("the second line does not hold reserved_until_unix_us"))?;
    let until: i64 = value
        .parse()
        .map_err(|_| corrupt("the reserved time is not a number"))?;
    if lines.next().is_some() || encode(until) != text {
        return Err(corrupt("the file has unexpected content"));
    }
    Ok(until)
}

/// The reserved time in `directory`, or None when there is no file (a new cluster).
pub fn read(directory: &Path) -> Result<Option<i64>, ReadError> {
    match fs::read(directory.join(FILE_NAME)) {
        Ok(bytes) => {
            let text = String::from_utf8(bytes)
                .map_err(|_| ReadError::Corrupt("the file is not text".to_owned()))?;
            decode(&text).map(Some)
        }
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(ReadError::Unreadable(error)),
    }
}

/// Name of the temporary file a write goes through.
pub const TEMPORARY_FILE_NAME: &str = "snowflake_id.reservation.tmp";

/// Durably replaces the reservation in `directory` with `reserved_until_unix_us`. The error names
/// the file that failed: the temporary file, the reservation file, or the directory.
pub fn write(directory: &Path, reserved_until_unix_us: i64) -> Result<(), WriteError> {
    let temporary = directory.join(TEMPORARY_FILE_NAME);
    let failed = |path: &Path| {
        let path = path.to_path_buf();
        move |error| WriteError { path, error }
    };
    let mut file = File::create(&temporary).map_err(failed(&temporary))?;
    file.write_all(encode(reserved_until_unix_us).as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(failed(&temporary))?;
    drop(file);
    let target = directory.join(FILE_NAME);
    fs::rename(&temporary, &target).map_err(failed(&target))?;
    File::open(directory)
        .and_then(|dir| dir.sync_all())
        .map_err(failed(directory))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn scratch(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "snowflake-reservation-{}-{name}",
            std::process::id()
        ));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn missing_file_means_a_new_cluster() {
        let dir = scratch("missing");
        assert!(matches!(read(&dir), Ok(None)));
    }

    #[test]
    fn write_then_read_and_overwrite() {
        let dir = scratch("roundtrip");
        write(&dir, 1_790_000_000_000_000).unwrap();
        assert_eq!(read(&dir).unwrap(), Some(1_790_000_000_000_000));
        write(&dir, 1_790_000_001_000_000).unwrap();
        assert_eq!(read(&dir).unwrap(), Some(1_790_000_001_000_000));
        assert!(!dir.join(TEMPORARY_FILE_NAME).exists());
    }

    #[test]
    fn a_failed_write_names_the_file_that_failed() {
        let dir = scratch("failed-write");
        fs::create_dir(dir.join(TEMPORARY_FILE_NAME)).unwrap(); // the temp name is taken
        let error = write(&dir, 1).unwrap_err();
        assert_eq!(error.path, dir.join(TEMPORARY_FILE_NAME));
        fs::remove_dir(dir.join(TEMPORARY_FILE_NAME)).unwrap();
        fs::create_dir_all(dir.join(FILE_NAME).join("occupied")).unwrap(); // rename target taken
        let error = write(&dir, 1).unwrap_err();
        assert_eq!(error.path, dir.join(FILE_NAME));
        assert!(error
            .to_string()
            .starts_with(&dir.join(FILE_NAME).display().to_string()));
    }

    #[test]
    fn anything_else_is_corrupt() {
        let dir = scratch("corrupt");
        for content in [
            "",
            "garbage",
            "snowflake_id reservation v1\n",
            "snowflake_id reservation v1\nreserved_until_unix_us=12x\n",
            "snowflake_id reservation v1\nreserved_until_unix_us=12",
            "snowflake_id reservation v1\nreserved_until_unix_us=+12\n",
            "snowflake_id reservation v1\nreserved_until_unix_us=12\nmore\n",
            "snowflake_id reservation v2\nreserved_until_unix_us=12\n",
        ] {
            fs::write(dir.join(FILE_NAME), content).unwrap();
            match read(&dir) {
                Err(ReadError::Corrupt(_)) => {}
                other => panic!("{content:?} read as {other:?}"),
            }
        }
        fs::write(dir.join(FILE_NAME), [0xff, 0xfe]).unwrap();
        assert!(matches!(read(&dir), Err(ReadError::Corrupt(_))));
    }

    #[test]
    fn unreadable_is_not_missing() {
        let dir = scratch("unreadable");
        fs::create_dir(dir.join(FILE_NAME)).unwrap(); // a directory cannot be read as a file
        let error = read(&dir).unwrap_err();
        assert!(matches!(error, ReadError::Unreadable(_)));
        assert!(error.to_string().starts_with("it cannot be read"));
    }

    proptest! {
        #[test]
        fn every_value_round_trips(value in any::<i64>()) {
            prop_assert_eq!(decode(&encode(value)).unwrap(), value);
        }
    }
}
