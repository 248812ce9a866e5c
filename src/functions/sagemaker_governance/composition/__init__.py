"""The composition root (``root.Root``) and one builder module per Lambda function."""
