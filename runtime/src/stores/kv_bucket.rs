//! A JetStream KV bucket the runtime keeps state in (conversations, tasks): connect, open the
//! bucket or create it, and make its retention (`max_age`, zero for none) the one asked for,
//! on an existing bucket too.

use std::time::Duration;

use async_nats::jetstream::{self, kv};

/// An open bucket and the connection it runs on.
#[derive(Debug, Clone)]
pub struct Bucket {
    pub client: async_nats::Client,
    pub kv: kv::Store,
}

/// Which step of opening a bucket failed, with the NATS error underneath (its `source()`).
#[derive(Debug, thiserror::Error)]
pub enum BucketError {
    #[error("cannot connect: {0}")]
    Connect(#[source] async_nats::ConnectError),
    #[error("cannot create the bucket: {0}")]
    Create(#[source] async_nats::jetstream::context::CreateKeyValueError),
    #[error("cannot read the bucket: {0}")]
    Read(#[source] async_nats::jetstream::stream::InfoError),
    #[error("cannot set the bucket's retention: {0}")]
    Retention(#[source] async_nats::jetstream::context::UpdateStreamError),
}

/// Opens `bucket` at `url` (created if absent, described as `description`) with `max_age`.
pub async fn open(
    url: &str,
    bucket: &str,
    description: &str,
    max_age: Duration,
) -> Result<Bucket, BucketError> {
    let client = async_nats::ConnectOptions::new()
        .connection_timeout(Duration::from_secs(5))
        .connect(url)
        .await
        .map_err(BucketError::Connect)?;
    let kv = open_on(&client, bucket, description, max_age).await?;
    Ok(Bucket { client, kv })
}

/// Opens `bucket` as [`open`] does, on a connection already made.
pub async fn open_on(
    client: &async_nats::Client,
    bucket: &str,
    description: &str,
    max_age: Duration,
) -> Result<kv::Store, BucketError> {
    let js = jetstream::new(client.clone());
    let kv = match js.get_key_value(bucket).await {
        Ok(kv) => kv,
        Err(_) => js
            .create_key_value(kv::Config {
                bucket: bucket.to_owned(),
                description: description.to_owned(),
                history: 1,
                storage: jetstream::stream::StorageType::File,
                max_age,
                ..Default::default()
            })
            .await
            .map_err(BucketError::Create)?,
    };
    let mut stream = kv.stream.clone();
    let info = stream.info().await.map_err(BucketError::Read)?;
    if info.config.max_age != max_age {
        let mut config = info.config.clone();
        config.max_age = max_age;
        js.update_stream(config)
            .await
            .map_err(BucketError::Retention)?;
        tracing::info!(bucket, retention = ?max_age, "bucket retention updated");
    }
    Ok(kv)
}
