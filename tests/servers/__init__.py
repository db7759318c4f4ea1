"""Real S3 servers for the test suite: moto's ThreadedMotoServer and a throwaway Ceph RGW."""
