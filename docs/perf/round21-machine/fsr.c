#include <stdio.h>
#include <stdlib.h>
#include <fcntl.h>
#include <unistd.h>
#include <time.h>
#include <string.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(int c,char**v){int rate=atoi(v[1]);double dur=atof(v[2]);int bytes=c>3?atoi(v[3]):512;
 int fd=open("/var/tmp/fsr.dat",O_WRONLY|O_CREAT|O_TRUNC,0644);char buf[65536];memset(buf,'x',sizeof buf);
 double s=now();long n=0;
 while(now()-s<dur){ double due=s+(double)n/rate; double t=now(); if(due>t){struct timespec ts={0,(long)((due-t)*1e9)};nanosleep(&ts,0);} write(fd,buf,bytes); fdatasync(fd); n++;}
 printf("rate %d: %ld syncs in %.1f s = %.0f/s\n",rate,n,dur,n/dur); unlink("/var/tmp/fsr.dat");}
