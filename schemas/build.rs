//! With the `grpc` feature: the vendored A2A proto (`a2a/proto/a2a.proto`) compiled into the
//! gRPC service, its client and its messages (`tonic-prost-build`), and each message's ProtoJSON
//! (`pbjson-build`). The proto is parsed by `protox`, in Rust: no `protoc` to download.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo::rerun-if-changed=a2a/proto");
    #[cfg(feature = "grpc")]
    grpc::generate()?;
    Ok(())
}

#[cfg(feature = "grpc")]
mod grpc {
    use std::path::PathBuf;

    use prost::Message as _;

    pub(super) fn generate() -> Result<(), Box<dyn std::error::Error>> {
        let out = PathBuf::from(std::env::var("OUT_DIR")?);
        let descriptors = protox::compile(["a2a.proto"], ["a2a/proto"])?;
        // The well-known types (Struct, Value, Timestamp, Empty) with their ProtoJSON.
        tonic_prost_build::configure()
            .build_server(true)
            .build_client(true)
            .build_transport(false)
            .compile_well_known_types(true)
            .extern_path(".google.protobuf", "::pbjson_types")
            .out_dir(&out)
            .compile_fds(descriptors.clone())?;
        pbjson_build::Builder::new()
            .register_descriptors(&descriptors.encode_to_vec())?
            .out_dir(&out)
            .build(&[".lf.a2a.v1"])?;
        Ok(())
    }
}
