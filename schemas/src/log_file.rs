//! A log file beside stdout: JSON lines appended to a file that rotates by size, as Pallas's
//! `PALLAS_LOG_FILE` does (10 MB, 5 files kept: `x.log`, `x.log.1` … `x.log.4`, the oldest
//! dropped). A line is never split across two files; a file that cannot be written loses the
//! line, never the process.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

/// Bytes a file holds before the next line starts a new one.
pub const MAX_BYTES: u64 = 10 * 1024 * 1024;
/// Files kept, the one written included.
pub const KEEP: usize = 5;

/// A size-rotated log file.
#[derive(Debug)]
pub struct RotatingFile {
    path: PathBuf,
    max_bytes: u64,
    keep: usize,
    open: Mutex<Open>,
}

#[derive(Debug)]
struct Open {
    file: File,
    written: u64,
}

impl RotatingFile {
    /// Appends to `path` (created, with its directory, if missing), rotating at [`MAX_BYTES`]
    /// and keeping [`KEEP`] files.
    pub fn open(path: &Path) -> io::Result<Self> {
        Self::with_limits(path, MAX_BYTES, KEEP)
    }

    /// [`RotatingFile::open`] with other limits.
    pub fn with_limits(path: &Path, max_bytes: u64, keep: usize) -> io::Result<Self> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        let written = file.metadata()?.len();
        Ok(Self {
            path: path.to_owned(),
            max_bytes,
            keep: keep.max(1),
            open: Mutex::new(Open { file, written }),
        })
    }

    /// `path.n`.
    fn numbered(&self, n: usize) -> PathBuf {
        let mut name = self.path.as_os_str().to_owned();
        name.push(format!(".{n}"));
        PathBuf::from(name)
    }

    /// Moves `x.log.{n}` to `x.log.{n+1}` from the oldest down (the oldest kept is dropped),
    /// `x.log` to `x.log.1`, and starts `x.log` empty.
    fn rotate(&self, open: &mut Open) -> io::Result<()> {
        open.file.flush()?;
        let _ = std::fs::remove_file(self.numbered(self.keep - 1));
        for n in (1..self.keep - 1).rev() {
            let from = self.numbered(n);
            if from.exists() {
                std::fs::rename(&from, self.numbered(n + 1))?;
            }
        }
        if self.keep > 1 {
            std::fs::rename(&self.path, self.numbered(1))?;
        } else {
            std::fs::remove_file(&self.path)?;
        }
        open.file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)?;
        open.written = 0;
        Ok(())
    }

    /// Writes one whole line (what the log layer hands over at once).
    fn write_line(&self, line: &[u8]) -> io::Result<()> {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        if open.written > 0 && open.written + line.len() as u64 > self.max_bytes {
            self.rotate(&mut open)?;
        }
        open.file.write_all(line)?;
        open.written += line.len() as u64;
        Ok(())
    }
}

/// What the log layer writes one event through: it gathers the event's bytes and hands them
/// to the file as one line when dropped.
#[derive(Debug)]
pub struct LineWriter<'a> {
    file: &'a RotatingFile,
    line: Vec<u8>,
}

impl Write for LineWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.line.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for LineWriter<'_> {
    fn drop(&mut self) {
        if !self.line.is_empty() {
            let _ = self.file.write_line(&self.line);
        }
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for RotatingFile {
    type Writer = LineWriter<'a>;

    fn make_writer(&'a self) -> Self::Writer {
        LineWriter {
            file: self,
            line: Vec::with_capacity(256),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(file: &RotatingFile, text: &str) {
        let mut w = tracing_subscriber::fmt::MakeWriter::make_writer(file);
        w.write_all(text.as_bytes()).unwrap();
    }

    #[test]
    fn lines_rotate_by_size_and_the_oldest_file_goes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("logs/runtime.log");
        let file = RotatingFile::with_limits(&path, 100, 3).unwrap();
        for i in 0..10 {
            write(
                &file,
                &format!("{{\"line\":{i},\"pad\":\"{}\"}}\n", "x".repeat(30)),
            );
        }
        let read = |p: PathBuf| std::fs::read_to_string(p).unwrap_or_default();
        let current = read(path.clone());
        let one = read(file.numbered(1));
        let two = read(file.numbered(2));
        assert!(!file.numbered(3).exists(), "3 files kept");
        for text in [&current, &one, &two] {
            assert!(text.len() <= 100, "{}", text.len());
            assert!(
                text.lines().all(|l| l.starts_with('{') && l.ends_with('}')),
                "whole lines: {text}"
            );
        }
        assert!(current.contains("\"line\":9"), "{current}");
        assert!(two.contains("\"line\":4"), "the oldest kept: {two}");
        assert!(
            !format!("{current}{one}{two}").contains("\"line\":0,"),
            "the oldest went"
        );
    }
}
