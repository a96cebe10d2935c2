//! [`FileEngine`]: one io_uring ring serving the file requests of the files opened on it.

use std::sync::Mutex;

use viaduct_fallback::file::{FileIo, FileIoConfig, RetryStats};
use viaduct_fallback::uring::Features;

use super::class::UringClass;
use super::error::FileIoError;
use crate::request::RequestClass;

/// One io_uring ring and its request class; cheap to clone (shared).
#[derive(Debug, Clone)]
pub struct FileEngine {
    pub(crate) class: RequestClass<UringClass>,
}

impl FileEngine {
    /// An engine with a ring of `depth` submission entries (SQPOLL off).
    pub fn new(depth: u32) -> Result<Self, FileIoError> {
        Self::with_config(&FileIoConfig {
            depth,
            ..FileIoConfig::default()
        })
    }

    /// An engine with full control over the ring.
    pub fn with_config(config: &FileIoConfig) -> Result<Self, FileIoError> {
        crate::error::register_error_kinds();
        let io = FileIo::new(config).map_err(FileIoError::Engine)?;
        Ok(Self {
            class: RequestClass::new(UringClass {
                engine: Mutex::new(io),
            }),
        })
    }

    /// What the kernel's io_uring offers.
    pub fn features(&self) -> Features {
        self.lock().features().clone()
    }

    /// How often the engine retried on its own: operations answered with `EAGAIN` or `EINTR`
    /// and waits interrupted by signals, none of which ends a request with an error.
    pub fn retries(&self) -> RetryStats {
        self.lock().retries()
    }

    /// Operations whose buffers the engine still holds (in flight, or finished and not yet
    /// collected by their request).
    pub fn outstanding(&self) -> usize {
        self.lock().outstanding()
    }

    /// Submits queued operations and reaps finished ones without blocking; returns how many
    /// finished. Besides the waits and tests on file requests, this is what gives back the
    /// buffers of requests dropped or freed before they completed (once the kernel is done with
    /// them), so a program that drops requests and starts no others can call it to drain them.
    pub fn poll(&self) -> Result<usize, FileIoError> {
        self.lock().poll().map_err(FileIoError::Progress)
    }

    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, FileIo> {
        self.class
            .ops()
            .engine
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }
}
