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

/// Opens `bucket` at `url` (created if absent, described as `description`) with `max_age`;
/// the error says which step failed.
pub async fn open(
    url: &str,
    bucket: &str,
    description: &str,
    max_age: Duration,
) -> Result<Bucket, String> {
    let client = async_nats::ConnectOptions::new()
        .connection_timeout(Duration::from_secs(5))
        .connect(url)
        .await
        .map_err(|e| format!("cannot connect: {e}"))?;
    let kv = open_on(&client, bucket, description, max_age).await?;
    Ok(Bucket { client, kv })
}

/// Opens `bucket` as [`open`] does, on a connection already made.
pub async fn open_on(
    client: &async_nats::Client,
    bucket: &str,
    description: &str,
    max_age: Duration,
) -> Result<kv::Store, String> {
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
            .map_err(|e| format!("cannot create the bucket: {e}"))?,
    };
    let mut stream = kv.stream.clone();
    let info = stream
        .info()
        .await
        .map_err(|e| format!("cannot read the bucket: {e}"))?;
    if info.config.max_age != max_age {
        let mut config = info.config.clone();
        config.max_age = max_age;
        js.update_stream(config)
            .await
            .map_err(|e| format!("cannot set the bucket's retention: {e}"))?;
        tracing::info!(bucket, retention = ?max_age, "bucket retention updated");
    }
    Ok(kv)
}
