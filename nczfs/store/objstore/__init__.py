"""Object stores through obstore: S3 (with boto3 for multipart uploads by id and copies), Google
Cloud Storage, Azure Blob, and a Zarr on a plain web server."""
